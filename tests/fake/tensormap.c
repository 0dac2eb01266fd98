/*
 * Tensor maps. Descriptors are opaque like the real ones: 128 bytes that depend on every
 * input, with no field the shim could read the global address from. The fake keeps its
 * own table, descriptor bytes -> global address, so a launch can find the operand.
 */
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define NBUCKETS 256
#define NWORDS CU_TENSOR_MAP_NUM_QWORDS

struct tmap_entry {
	uint64_t words[NWORDS];
	uint64_t digest; /* of every input but the address, for cuTensorMapReplaceAddress */
	CUdeviceptr addr;
	struct tmap_entry *next;
};

static struct tmap_entry *buckets[NBUCKETS];

static uint64_t mix(uint64_t x) /* splitmix64 finalizer */
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t absorb(uint64_t h, uint64_t v)
{
	return mix(h ^ (v + 0x9e3779b97f4a7c15ull));
}

static uint64_t absorb_array64(uint64_t h, const cuuint64_t *v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		h = absorb(h, v[i]);
	return h;
}

static uint64_t absorb_array32(uint64_t h, const cuuint32_t *v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		h = absorb(h, v[i]);
	return h;
}

static struct tmap_entry **bucket(const uint64_t *words)
{
	return &buckets[words[0] % NBUCKETS];
}

static struct tmap_entry *find(const void *desc)
{
	uint64_t words[NWORDS];
	memcpy(words, desc, sizeof(words));
	for (struct tmap_entry *e = *bucket(words); e; e = e->next)
		if (memcmp(e->words, words, sizeof(words)) == 0)
			return e;
	return NULL;
}

bool fake_tmap_lookup(const void *desc, CUdeviceptr *addr)
{
	const struct tmap_entry *e = find(desc);
	if (e)
		*addr = e->addr;
	return e != NULL;
}

int fake_tensor_map_address(const CUtensorMap *map, CUdeviceptr *addr)
{
	fake_lock();
	bool found = map && addr && fake_tmap_lookup(map, addr);
	fake_unlock();
	return found;
}

/* FAKE_CUDA_TMAP_ADDRESS_WORD=k (0..15): word k of every descriptor holds the global address
 * as it is, the rest stays opaque; unset or anything else: fully opaque. Read at each encode,
 * so one process can try both. */
static int address_word(void)
{
	const char *s = getenv("FAKE_CUDA_TMAP_ADDRESS_WORD");
	char *end;
	long k = s ? strtol(s, &end, 10) : -1;
	return s && end != s && *end == '\0' && k >= 0 && k < NWORDS ? (int)k : -1;
}

/* Writes the descriptor for (digest, addr) and records it; identical inputs give identical
 * bytes, so repeated encodes (DeepGEMM encodes on every call) reuse one entry. */
static CUresult emit(CUtensorMap *map, uint64_t digest, CUdeviceptr addr)
{
	uint64_t words[NWORDS];
	for (unsigned i = 0; i < NWORDS; i++)
		words[i] = mix(digest + i * 0x632be59bd9b4e019ull) ^ mix((addr ^ digest) + i);
	int k = address_word();
	if (k >= 0)
		words[k] = addr;
	if (!find(words)) {
		struct tmap_entry *e = malloc(sizeof(*e));
		if (!e)
			return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(e->words, words, sizeof(words));
		e->digest = digest;
		e->addr = addr;
		e->next = *bucket(words);
		*bucket(words) = e;
	}
	memcpy(map->opaque, words, sizeof(words));
	return CUDA_SUCCESS;
}

/* Bits per element of each CUtensorMapDataType. */
static const unsigned char type_bits[] = {
	[CU_TENSOR_MAP_DATA_TYPE_UINT8] = 8,	     [CU_TENSOR_MAP_DATA_TYPE_UINT16] = 16,
	[CU_TENSOR_MAP_DATA_TYPE_UINT32] = 32,	     [CU_TENSOR_MAP_DATA_TYPE_INT32] = 32,
	[CU_TENSOR_MAP_DATA_TYPE_UINT64] = 64,	     [CU_TENSOR_MAP_DATA_TYPE_INT64] = 64,
	[CU_TENSOR_MAP_DATA_TYPE_FLOAT16] = 16,	     [CU_TENSOR_MAP_DATA_TYPE_FLOAT32] = 32,
	[CU_TENSOR_MAP_DATA_TYPE_FLOAT64] = 64,	     [CU_TENSOR_MAP_DATA_TYPE_BFLOAT16] = 16,
	[CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ] = 32,  [CU_TENSOR_MAP_DATA_TYPE_TFLOAT32] = 32,
	[CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ] = 32, [CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B] = 4,
	[CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B] = 4, [CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B] = 6,
};

static bool is_float(CUtensorMapDataType t)
{
	return t >= CU_TENSOR_MAP_DATA_TYPE_FLOAT16 && t <= CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ;
}

static bool is_packed16(CUtensorMapDataType t)
{
	return t == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B ||
	       t == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

/* Span a swizzle mode allows for the inner box dimension, in bytes. */
static unsigned swizzle_span(CUtensorMapSwizzle s)
{
	static const unsigned span[] = {
		[CU_TENSOR_MAP_SWIZZLE_NONE] = 0,
		[CU_TENSOR_MAP_SWIZZLE_32B] = 32,
		[CU_TENSOR_MAP_SWIZZLE_64B] = 64,
		[CU_TENSOR_MAP_SWIZZLE_128B] = 128,
		[CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B] = 128,
		[CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B] = 128,
		[CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B] = 128,
	};
	return span[s];
}

/* The inputs every encode variant shares. */
struct tmap_common {
	CUtensorMap *map;
	CUtensorMapDataType type;
	cuuint32_t rank;
	void *addr;
	const cuuint64_t *dims;
	const cuuint64_t *strides;
	const cuuint32_t *elem_strides;
	CUtensorMapInterleave interleave;
	CUtensorMapSwizzle swizzle;
	CUtensorMapL2promotion l2;
	CUtensorMapFloatOOBfill oob;
	unsigned min_rank;
	uint64_t inner_bytes; /* bytes of the box's inner dimension */
};

/* Checks the shared inputs roughly like the real driver and folds them into a digest. */
static CUresult check_common(const struct tmap_common *c, uint64_t *digest)
{
	if (!c->map || (uintptr_t)c->map % 64 || c->type < 0 ||
	    c->type > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B || c->rank < c->min_rank ||
	    c->rank > 5 || !c->dims || (c->rank > 1 && !c->strides) || !c->elem_strides ||
	    c->interleave < 0 || c->interleave > CU_TENSOR_MAP_INTERLEAVE_32B || c->swizzle < 0 ||
	    c->swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B || c->l2 < 0 ||
	    c->l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B || c->oob < 0 ||
	    c->oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
		return CUDA_ERROR_INVALID_VALUE;
	bool wide32 = c->interleave == CU_TENSOR_MAP_INTERLEAVE_32B || is_packed16(c->type);
	unsigned addr_align = wide32 ? 32 : 16;
	if ((uintptr_t)c->addr % addr_align ||
	    (c->interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && c->rank < 3) ||
	    (c->interleave == CU_TENSOR_MAP_INTERLEAVE_32B &&
	     c->swizzle != CU_TENSOR_MAP_SWIZZLE_32B) ||
	    (c->oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float(c->type)))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < c->rank; i++)
		if (c->dims[i] == 0 || c->dims[i] > (1ull << 32) || c->elem_strides[i] == 0 ||
		    c->elem_strides[i] > 8)
			return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i + 1 < c->rank; i++)
		if (c->strides[i] % addr_align || c->strides[i] >= (1ull << 40))
			return CUDA_ERROR_INVALID_VALUE;
	if (c->interleave == CU_TENSOR_MAP_INTERLEAVE_NONE &&
	    c->swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && c->inner_bytes > swizzle_span(c->swizzle))
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t h = absorb(0, c->type);
	h = absorb(h, c->rank);
	h = absorb_array64(h, c->dims, c->rank);
	h = absorb_array64(h, c->strides, c->rank - 1);
	h = absorb_array32(h, c->elem_strides, c->rank);
	h = absorb(h, c->interleave);
	h = absorb(h, c->swizzle);
	h = absorb(h, c->l2);
	*digest = absorb(h, c->oob);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuTensorMapEncodeTiled(
	CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
	void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
	const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
	CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
	CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
	FAKE_ENTER();
	if (!boxDim || tensorRank == 0 || tensorRank > 5 || tensorDataType < 0 ||
	    tensorDataType > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	uint64_t inner = (uint64_t)boxDim[0] * type_bits[tensorDataType] / 8;
	for (unsigned i = 0; i < tensorRank; i++)
		if (boxDim[i] == 0 || boxDim[i] > 256)
			return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if ((interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && inner % 16) ||
	    (is_packed16(tensorDataType) && boxDim[0] != 128))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct tmap_common c = {
		tensorMap,	tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
		elementStrides, interleave,	swizzle,    l2Promotion,   oobFill,   1,
		inner,
	};
	uint64_t digest;
	CUresult rc = check_common(&c, &digest);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	digest = absorb(absorb_array32(digest, boxDim, tensorRank), 1 /* tiled */);
	return fake_leave(emit(tensorMap, digest, (CUdeviceptr)(uintptr_t)globalAddress));
}

/* Im2col corner offsets allowed for each rank (3, 4, 5). */
static bool corner_ok(cuuint32_t rank, int v)
{
	static const int limit[] = {[3] = 32768, [4] = 128, [5] = 16};
	return v >= -limit[rank] && v < limit[rank];
}

CUresult CUDAAPI cuTensorMapEncodeIm2col(
	CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
	void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
	const int *pixelBoxLowerCorner, const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
	cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
	CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
	CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
	FAKE_ENTER();
	if (!pixelBoxLowerCorner || !pixelBoxUpperCorner || tensorRank < 3 || tensorRank > 5 ||
	    tensorDataType < 0 || tensorDataType > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B ||
	    channelsPerPixel == 0 || channelsPerPixel > 256 || pixelsPerColumn == 0 ||
	    pixelsPerColumn > 1024)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	for (unsigned i = 0; i + 2 < tensorRank; i++)
		if (!corner_ok(tensorRank, pixelBoxLowerCorner[i]) ||
		    !corner_ok(tensorRank, pixelBoxUpperCorner[i]))
			return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct tmap_common c = {
		tensorMap,
		tensorDataType,
		tensorRank,
		globalAddress,
		globalDim,
		globalStrides,
		elementStrides,
		interleave,
		swizzle,
		l2Promotion,
		oobFill,
		3,
		(uint64_t)channelsPerPixel * type_bits[tensorDataType] / 8,
	};
	uint64_t digest;
	CUresult rc = check_common(&c, &digest);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	for (unsigned i = 0; i + 2 < tensorRank; i++)
		digest = absorb(absorb(digest, (uint32_t)pixelBoxLowerCorner[i]),
				(uint32_t)pixelBoxUpperCorner[i]);
	digest = absorb(absorb(absorb(digest, channelsPerPixel), pixelsPerColumn), 2 /* im2col */);
	return fake_leave(emit(tensorMap, digest, (CUdeviceptr)(uintptr_t)globalAddress));
}

CUresult CUDAAPI cuTensorMapEncodeIm2colWide(
	CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
	void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
	int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel,
	cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
	CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode,
	CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
	CUtensorMapFloatOOBfill oobFill)
{
	FAKE_ENTER();
	/* Only the 64B and 128B swizzles (and 128B with 32B atoms) exist for the wide mode. */
	if (tensorRank < 3 || tensorRank > 5 || tensorDataType < 0 ||
	    tensorDataType > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B || channelsPerPixel == 0 ||
	    channelsPerPixel > 256 ||
	    (mode == CU_TENSOR_MAP_IM2COL_WIDE_MODE_W &&
	     (pixelsPerColumn == 0 || pixelsPerColumn > 1024)) ||
	    (mode != CU_TENSOR_MAP_IM2COL_WIDE_MODE_W &&
	     mode != CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128) ||
	    (swizzle != CU_TENSOR_MAP_SWIZZLE_64B && swizzle != CU_TENSOR_MAP_SWIZZLE_128B &&
	     swizzle != CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B) ||
	    !corner_ok(tensorRank, pixelBoxLowerCornerWidth) ||
	    !corner_ok(tensorRank, pixelBoxUpperCornerWidth))
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	struct tmap_common c = {
		tensorMap,
		tensorDataType,
		tensorRank,
		globalAddress,
		globalDim,
		globalStrides,
		elementStrides,
		interleave,
		swizzle,
		l2Promotion,
		oobFill,
		3,
		(uint64_t)channelsPerPixel * type_bits[tensorDataType] / 8,
	};
	uint64_t digest;
	CUresult rc = check_common(&c, &digest);
	if (rc != CUDA_SUCCESS)
		return fake_leave(rc);
	digest = absorb(absorb(digest, (uint32_t)pixelBoxLowerCornerWidth),
			(uint32_t)pixelBoxUpperCornerWidth);
	digest = absorb(absorb(absorb(digest, channelsPerPixel), pixelsPerColumn), mode);
	digest = absorb(digest, 3 /* im2col wide */);
	return fake_leave(emit(tensorMap, digest, (CUdeviceptr)(uintptr_t)globalAddress));
}

CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress)
{
	FAKE_ENTER();
	if (!tensorMap || (uintptr_t)tensorMap % 64 || (uintptr_t)globalAddress % 16)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	const struct tmap_entry *e = find(tensorMap);
	if (!e) /* not a descriptor this driver made */
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	return fake_leave(emit(tensorMap, e->digest, (CUdeviceptr)(uintptr_t)globalAddress));
}
