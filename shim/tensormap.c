/* Tensor maps by the bytes of their descriptor.
 *
 * A CUtensorMap is opaque: the only way to know which memory a TMA
 * descriptor passed to a kernel points at is to have seen it encoded.  JIT
 * libraries encode new descriptors on every call (DeepGEMM does), so the
 * registry is a fixed-size cache: SHARDS sets of WAYS entries, replaced
 * round-robin within a set, each set under its own lock (never a global
 * one, and never across a driver call). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

enum { SHARDS = 64, WAYS = 64, DESC = 128 };

struct entry {
	uint64_t hash;             /* 0: empty */
	unsigned char desc[DESC];
	struct cg_tmap info;
};

static struct shard {
	pthread_mutex_t lock;
	unsigned next;
	struct entry e[WAYS];
} shards[SHARDS];

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_locks(void)
{
	for (int i = 0; i < SHARDS; i++)
		pthread_mutex_init(&shards[i].lock, NULL);
}

/* Word-wise: it runs for every tensor-map parameter of every checked launch. */
static uint64_t hash_desc(const void *desc)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL;
	for (int i = 0; i < DESC / 8; i++) {
		uint64_t w;
		memcpy(&w, (const char *)desc + 8 * i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	return h | 1;
}

static void put(const void *desc, const struct cg_tmap *info)
{
	pthread_once(&once, init_locks);
	uint64_t h = hash_desc(desc);
	struct shard *s = &shards[h % SHARDS];
	pthread_mutex_lock(&s->lock);
	struct entry *slot = NULL;
	for (int i = 0; i < WAYS && !slot; i++)
		if (s->e[i].hash == h && memcmp(s->e[i].desc, desc, DESC) == 0)
			slot = &s->e[i];
	if (!slot)
		slot = &s->e[s->next++ % WAYS];
	slot->hash = h;
	memcpy(slot->desc, desc, DESC);
	slot->info = *info;
	pthread_mutex_unlock(&s->lock);
}

int cg_tmap_find(const void *desc, struct cg_tmap *out)
{
	pthread_once(&once, init_locks);
	uint64_t h = hash_desc(desc);
	struct shard *s = &shards[h % SHARDS];
	int found = 0;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < WAYS && !found; i++)
		if (s->e[i].hash == h && memcmp(s->e[i].desc, desc, DESC) == 0) {
			*out = s->e[i].info;
			found = 1;
		}
	pthread_mutex_unlock(&s->lock);
	return found;
}

void cg_tmap_describe(const struct cg_tmap *t, char *buf, size_t n)
{
	static const char *const types[] = {"u8", "u16", "u32", "i32", "u64", "i64", "f16",
					    "f32", "f64", "bf16", "f32_ftz", "tf32", "tf32_ftz"};
	const char *type = t->dtype >= 0 && t->dtype < (int)(sizeof types / sizeof types[0])
				   ? types[t->dtype] : "fp8/packed";
	size_t o = (size_t)snprintf(buf, n, "tensor map %s [", type);
	/* Outermost dimension first, as a tensor's shape reads. */
	for (int i = t->rank - 1; i >= 0 && o < n; i--)
		o += (size_t)snprintf(buf + o, n - o, "%llu%s", (unsigned long long)t->dims[i],
				      i ? ", " : "");
	if (o < n)
		o += (size_t)snprintf(buf + o, n - o, "] box [");
	for (int i = t->rank - 1; i >= 0 && o < n; i--)
		o += (size_t)snprintf(buf + o, n - o, "%u%s", t->box[i], i ? ", " : "");
	if (o < n)
		snprintf(buf + o, n - o, "]");
}

static void record(CUresult rc, const CUtensorMap *map, CUtensorMapDataType type,
		   cuuint32_t rank, void *addr, const cuuint64_t *dims, const cuuint32_t *box)
{
	if (rc != CUDA_SUCCESS || !map)
		return;
	struct cg_tmap t = {.addr = (uintptr_t)addr, .dtype = (int)type, .rank = (int)rank};
	for (cuuint32_t i = 0; i < rank && i < 5; i++) {
		t.dims[i] = dims ? dims[i] : 0;
		t.box[i] = box ? box[i] : 0;
	}
	if (t.rank > 5)
		t.rank = 5;
	put(map, &t);
}

CUresult cg_on_cuTensorMapEncodeTiled(const struct cg_variant *v, CUtensorMap *tensorMap,
				      CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
				      void *globalAddress, const cuuint64_t *globalDim,
				      const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
				      const cuuint32_t *elementStrides,
				      CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
				      CUtensorMapL2promotion l2Promotion,
				      CUtensorMapFloatOOBfill oobFill)
{
	CUresult rc = CG_REAL(cuTensorMapEncodeTiled, v)(tensorMap, tensorDataType, tensorRank,
							 globalAddress, globalDim, globalStrides,
							 boxDim, elementStrides, interleave,
							 swizzle, l2Promotion, oobFill);
	record(rc, tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, boxDim);
	return rc;
}

CUresult cg_on_cuTensorMapEncodeIm2col(const struct cg_variant *v, CUtensorMap *tensorMap,
				       CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
				       void *globalAddress, const cuuint64_t *globalDim,
				       const cuuint64_t *globalStrides,
				       const int *pixelBoxLowerCorner,
				       const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
				       cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
				       CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
				       CUtensorMapL2promotion l2Promotion,
				       CUtensorMapFloatOOBfill oobFill)
{
	CUresult rc = CG_REAL(cuTensorMapEncodeIm2col, v)(
		tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
		pixelBoxLowerCorner, pixelBoxUpperCorner, channelsPerPixel, pixelsPerColumn,
		elementStrides, interleave, swizzle, l2Promotion, oobFill);
	record(rc, tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, NULL);
	return rc;
}

CUresult cg_on_cuTensorMapEncodeIm2colWide(const struct cg_variant *v, CUtensorMap *tensorMap,
					   CUtensorMapDataType tensorDataType,
					   cuuint32_t tensorRank, void *globalAddress,
					   const cuuint64_t *globalDim,
					   const cuuint64_t *globalStrides,
					   int pixelBoxLowerCornerWidth,
					   int pixelBoxUpperCornerWidth,
					   cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
					   const cuuint32_t *elementStrides,
					   CUtensorMapInterleave interleave,
					   CUtensorMapIm2ColWideMode mode,
					   CUtensorMapSwizzle swizzle,
					   CUtensorMapL2promotion l2Promotion,
					   CUtensorMapFloatOOBfill oobFill)
{
	CUresult rc = CG_REAL(cuTensorMapEncodeIm2colWide, v)(
		tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
		pixelBoxLowerCornerWidth, pixelBoxUpperCornerWidth, channelsPerPixel,
		pixelsPerColumn, elementStrides, interleave, mode, swizzle, l2Promotion, oobFill);
	record(rc, tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, NULL);
	return rc;
}

/* Same tensor, new address: the new descriptor inherits the shape. */
CUresult cg_on_cuTensorMapReplaceAddress(const struct cg_variant *v, CUtensorMap *tensorMap,
					 void *globalAddress)
{
	struct cg_tmap t;
	int known = tensorMap && cg_tmap_find(tensorMap, &t);
	CUresult rc = CG_REAL(cuTensorMapReplaceAddress, v)(tensorMap, globalAddress);
	if (rc == CUDA_SUCCESS && known) {
		t.addr = (uintptr_t)globalAddress;
		put(tensorMap, &t);
	}
	return rc;
}
