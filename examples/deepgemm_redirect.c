/* deepgemm_redirect -- one DeepGEMM sm90 call, made the way DeepGEMM makes it,
 * in one of the situations a multi-GPU job puts it in; the output is checked
 * against a CPU reference.  It is what `ctxguard --mode redirect` must keep
 * correct, and what abort must stop.
 *
 * Like DeepGEMM (csrc/jit): libcuda through dlopen + dlsym only; the cubin
 * (kernels/fixtures/deepgemm_sm90.cu: DeepGEMM's exact kernel names and
 * parameter lists) loaded with cuLibraryLoadFromFile and each kernel turned
 * into a CUfunction once, on device 0, and cached with no device in the key;
 * the dynamic shared memory attribute set once per function; tensor maps
 * encoded on every call with DeepGEMM's dims, strides, boxes and 128-byte
 * swizzle (fp8 operands as UINT8, the sfa scales FLOAT32 in the MN-major
 * TMA-aligned layout); an fp8 call first launches transpose_fp32 (the scale
 * transform) and then the GEMM; cuLaunchKernelEx on the current device's
 * stream with the cluster-dimension (2-CTA multicast) and programmatic
 * serialization attributes.
 *
 * usage: deepgemm_redirect DTYPE LAYOUT SITUATION [CUBIN]
 *   DTYPE      bf16 (B K-major, "nt") | bf16nn (B MN-major; contiguous only) | fp8
 *   LAYOUT     normal | contiguous | psum | masked   (DeepGEMM's GemmType)
 *   SITUATION  what follows DeepGEMM's first call (always made on device 0,
 *              operands there, checked: exit 2 if wrong):
 *     same         nothing more (one device is enough);
 *     silent       current device 0, operands on device 1, peer access on;
 *     race-default the same while device 1's legacy default stream (PyTorch's
 *                  default stream) is still running a long producer chain
 *                  that rewrites A; no synchronisation before the call;
 *     race-side    the same with the chain on a non-blocking stream of device
 *                  1 (a PyTorch pool stream);
 *     handle       current device 1, operands there (set_device(1)): the
 *                  cached device-0 function on device 1's stream;
 *     capture      current device 0, operands on device 1, the call captured
 *                  into a CUDA graph on a stream of device 0, the graph
 *                  launched, D reset, launched again (a CUDA-graph replay);
 *     blocked      silent, while a stream the program created on device 1
 *                  waits for a flag that the program's next work on the
 *                  launch stream sets (the shape of a collective's two
 *                  halves): the launch stream must finish within 5 s, else
 *                  the program releases the flag from the host itself and
 *                  exits 6.
 *   CUBIN      default build/gpu/deepgemm_sm90.cubin
 * The reference is computed on the CPU in double from the A read back after
 * everything finished (the producer's final values in the race situations).
 *
 * exit codes (deepgemm_route's):
 *   0  correct result: relative error <= 1e-2 (bf16) / 3e-2 (fp8)
 *   1  usage or set-up failure
 *   2  wrong result from the first call on device 0 (fixture or route broken)
 *   3  CUDA driver error from a GEMM call or the synchronisation after it,
 *      printed on stderr as DeepGEMM's DG_CUDA_DRIVER_CHECK formats it
 *   4  wrong result in the situation: silent corruption
 *   5  not reproducible here: fewer than 2 devices, or no peer access
 *   6  blocked: the launch stream did not finish while the flag was unset
 * Progress goes to stdout (line-buffered); stderr carries driver errors only.
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum dtype { DT_BF16, DT_BF16_NN, DT_FP8 };
enum layout { L_NORMAL, L_CONTIGUOUS, L_PSUM, L_MASKED };
enum situation { S_SAME, S_SILENT, S_RACE_DEFAULT, S_RACE_SIDE, S_HANDLE, S_CAPTURE, S_BLOCKED };
enum { EXIT_BLOCKED = 6 };

static const char *const dtype_names[] = { "bf16", "bf16nn", "fp8" };
static const char *const layout_names[] = { "normal", "contiguous", "psum", "masked" };
static const char *const situation_names[] = { "same", "silent", "race-default", "race-side",
						 "handle", "capture", "blocked" };

/* Problem: G groups of these many rows; N, K multiples of the tiles. */
enum { G = 4, N = 256, K = 512, KB = K / 128, NB = N / 128, ALIGN_ROWS = 128, NORMAL_M = 200 };
static const uint32_t group_rows[G] = { 100, 128, 37, 90 };

/* The fixture's specialisations (deepgemm_sm90.cu): tiles, threads, SMs,
 * multicast, pipeline stages, as DeepGEMM's host code makes them. */
enum { BLOCK_M = 128, BLOCK_N = 128, NUM_SMS = 132, THREADS = 384, MULTICAST = 2, SWIZZLE = 128,
       STAGES = 4 };
enum { TRANSPOSE_THREADS = 512, TRANSPOSE_BLOCK = 64 };
enum { TRANSPOSE_SMEM = TRANSPOSE_BLOCK * (KB + 1 - KB % 2) * 4 };   /* PADDED_SF_K floats a row */

/* SHAPE_N, SHAPE_K: "0" "0" for normal, "256" "512" (compiled in) otherwise. */
#define BF16_NAME(MAJOR_B, SN, SK, GROUPS, TYPE)                                                  \
	"_ZN9deep_gemm19sm90_bf16_gemm_implILN4cute4UMMA5MajorE0ELS3_" MAJOR_B "ELj0ELj" SN "ELj" \
	SK "ELj" GROUPS "ELj128ELj128ELj64ELj128ELj128ELj128ELj4ELj128ELj256ELj2ELb0ELj132E"       \
	"LNS_8GemmTypeE" TYPE "ELb0EN7cutlass10bfloat16_tEEEvPijjj14CUtensorMap_stS8_S8_"
#define FP8_NAME(SN, SK, GROUPS, TYPE)                                                             \
	"_ZN9deep_gemm23sm90_fp8_gemm_1d2d_implILN4cute4UMMA5MajorE0ELj0ELj" SN "ELj" SK "ELj"     \
	GROUPS "ELj128ELj128ELj128ELj128ELj128ELj128ELj4ELj128ELj256ELj2ELb0ELj132ELNS_8GemmTypeE" \
	TYPE "EN7cutlass10bfloat16_tENS_8epilogue9transform16EpilogueIdentityEEEvPfPijjj"         \
	"14CUtensorMap_stSC_SC_SC_"
/* [dtype][layout]; GemmType: Normal 0, MGroupedContiguous 1, MGroupedMasked 2, psum 5. */
static const char *const gemm_names[3][4] = {
	[DT_BF16] = { BF16_NAME("0", "0", "0", "1", "0"), BF16_NAME("0", "256", "512", "4", "1"),
		      BF16_NAME("0", "256", "512", "4", "5"), BF16_NAME("0", "256", "512", "4", "2") },
	[DT_BF16_NN] = { NULL, BF16_NAME("1", "256", "512", "4", "1"), NULL, NULL },
	[DT_FP8] = { FP8_NAME("0", "0", "1", "0"), FP8_NAME("256", "512", "4", "1"),
		     FP8_NAME("256", "512", "4", "5"), FP8_NAME("256", "512", "4", "2") },
};
static const char transpose_name[] = "_ZN9deep_gemm14transpose_fp32ILj512ELj64ELj4ELj5EEEvPKfPfj";
static const char producer_name[] = "ctxguard_fixture_produce";

enum { CHAIN_LINKS = 16 };
static const uint64_t link_spin_ns = 12000000;   /* 16 x 12 ms: the call comes long before the end */
static const uint16_t d_sentinel = 0xDEAD;        /* rows of no group must keep it */

#define DG_PROG "deepgemm_redirect"
#define DRIVER_CALLS(X) \
	X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDeviceGet) X(cuDeviceGetCount) \
	X(cuDeviceCanAccessPeer) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxSynchronize) \
	X(cuCtxEnablePeerAccess) X(cuMemAlloc) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuStreamCreate) \
	X(cuStreamQuery) X(cuLibraryLoadFromFile) X(cuLibraryGetKernel) X(cuKernelGetFunction) \
	X(cuFuncSetAttribute) X(cuTensorMapEncodeTiled) X(cuLaunchKernelEx) X(cuStreamSynchronize) \
	X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch) \
	X(cuMemsetD16) X(cuMemAllocHost) X(cuStreamWaitValue32) X(cuStreamWriteValue32)
#include "deepgemm_host.h"

/* ---- host data ---- */

static float float_from_e4m3(uint8_t v)
{
	int e = (v >> 3) & 15, m = v & 7;
	float f = e ? ldexpf(1.0f + m / 8.0f, e - 7) : ldexpf(m / 8.0f, -6);
	return v & 0x80 ? -f : f;
}

/* A finite e4m3 value in [-3.75, 3.75] with exponent 2^-3 .. 2^1. */
static uint8_t e4m3_hash(uint64_t i, uint32_t seed)
{
	uint32_t h = (uint32_t)((unit_hash(i, seed) + 1.0f) * 4194304.0f);
	return (uint8_t)((h & 0x80u) | ((4u + h % 5u) << 3) | ((h >> 8) & 7u));
}

static uint32_t align_up(uint32_t x, uint32_t a)
{
	return (x + a - 1) / a * a;
}

struct problem {
	int dtype, layout;
	size_t elem;            /* bytes per A/B element */
	uint32_t m;             /* shape_m: rows of A (max_m for masked) */
	uint32_t groups;        /* the kernel's kNumGroups */
	uint32_t rows;          /* rows of A and D as the maps see them: m * G' */
	uint32_t batches;       /* G': G for masked, else 1 */
	uint32_t grouped_len;   /* ints in grouped_layout, 0: NULL */
	int *grouped;           /* grouped_layout: [m] contiguous, [G] psum / masked */
	int *row_group;         /* [rows]: group of each row, -1: none (host's own reading) */
	uint8_t *a, *b;         /* A [rows][K]; B [G][N][K] (nt, fp8) or [G][K][N] (nn) */
	float *sf, *sfb;        /* fp8: sf [rows][KB] row-major (DeepGEMM's input); sfb [G][NB][KB] */
	uint16_t *d;            /* [rows][N] bf16, read back */
};

static void make_layout(struct problem *p)
{
	uint32_t start = 0;

	switch (p->layout) {
	case L_NORMAL:
		p->m = NORMAL_M;
		p->groups = 1;
		break;
	case L_CONTIGUOUS:
		for (int g = 0; g < G; g++)
			p->m += align_up(group_rows[g], ALIGN_ROWS);
		p->groups = G;
		break;
	case L_PSUM:            /* group g: [align(end[g-1], 128), end[g]); m = end[G-1] */
		for (int g = 0; g < G; g++) {
			p->m = start + group_rows[g];
			start = align_up(p->m, ALIGN_ROWS);
		}
		p->groups = G;
		break;
	case L_MASKED:          /* m multiple of BLOCK_M: no tile spans two groups */
		p->m = ALIGN_ROWS;
		p->groups = G;
		break;
	}
	p->batches = p->layout == L_MASKED ? G : 1;
	p->rows = p->m * p->batches;
	p->row_group = xcalloc(p->rows, sizeof *p->row_group);
	for (uint32_t r = 0; r < p->rows; r++)
		p->row_group[r] = p->layout == L_NORMAL ? 0 : -1;
	p->grouped_len = p->layout == L_NORMAL ? 0 : p->layout == L_CONTIGUOUS ? p->m : G;
	p->grouped = xcalloc(p->grouped_len, sizeof *p->grouped);
	start = 0;
	for (uint32_t g = 0, row = 0; p->layout != L_NORMAL && g < G; g++) {
		switch (p->layout) {
		case L_CONTIGUOUS:
			for (uint32_t r = 0; r < align_up(group_rows[g], ALIGN_ROWS); r++, row++)
				p->grouped[row] = p->row_group[row] = r < group_rows[g] ? (int)g : -1;
			break;
		case L_PSUM:
			p->grouped[g] = (int)(start + group_rows[g]);
			for (uint32_t r = 0; r < group_rows[g]; r++)
				p->row_group[start + r] = (int)g;
			start = align_up(start + group_rows[g], ALIGN_ROWS);
			break;
		case L_MASKED:
			p->grouped[g] = (int)group_rows[g];
			for (uint32_t r = 0; r < group_rows[g]; r++)
				p->row_group[g * p->m + r] = (int)g;
			break;
		}
	}
}

static void make_problem(struct problem *p, int dtype, int layout)
{
	memset(p, 0, sizeof *p);
	p->dtype = dtype;
	p->layout = layout;
	p->elem = dtype == DT_FP8 ? 1 : 2;
	make_layout(p);
	p->a = xcalloc((size_t)p->rows * K, p->elem);
	p->b = xcalloc((size_t)G * N * K, p->elem);
	p->d = xcalloc((size_t)p->rows * N, sizeof *p->d);
	if (dtype == DT_FP8) {
		for (size_t i = 0; i < (size_t)p->rows * K; i++)
			p->a[i] = e4m3_hash(i, 1);
		for (size_t i = 0; i < (size_t)G * N * K; i++)
			p->b[i] = e4m3_hash(i, 2);
		p->sf = xcalloc((size_t)p->rows * KB, sizeof *p->sf);
		p->sfb = xcalloc((size_t)G * NB * KB, sizeof *p->sfb);
		for (size_t i = 0; i < (size_t)p->rows * KB; i++)
			p->sf[i] = 1.0f + 0.5f * unit_hash(i, 4);
		for (size_t i = 0; i < (size_t)G * NB * KB; i++)
			p->sfb[i] = 1.0f + 0.5f * unit_hash(i, 5);
	} else {
		uint16_t *a = (uint16_t *)(void *)p->a, *b = (uint16_t *)(void *)p->b;
		for (size_t i = 0; i < (size_t)p->rows * K; i++)
			a[i] = bf16_from_float(unit_hash(i, 1));
		for (size_t i = 0; i < (size_t)G * N * K; i++)
			b[i] = bf16_from_float(unit_hash(i, 2));
	}
}

static void free_problem(struct problem *p)
{
	free(p->grouped);
	free(p->row_group);
	free(p->a);
	free(p->b);
	free(p->sf);
	free(p->sfb);
	free(p->d);
}

static double a_at(const struct problem *p, uint32_t r, uint32_t k)
{
	size_t i = (size_t)r * K + k;
	return p->dtype == DT_FP8 ? float_from_e4m3(p->a[i])
				  : float_from_bf16(((const uint16_t *)(const void *)p->a)[i]);
}

/* B as [G][N][K] whatever its storage. */
static double b_at(const struct problem *p, uint32_t g, uint32_t n, uint32_t k)
{
	const uint16_t *b = (const uint16_t *)(const void *)p->b;

	switch (p->dtype) {
	case DT_FP8:
		return float_from_e4m3(p->b[((size_t)g * N + n) * K + k]);
	case DT_BF16_NN:
		return float_from_bf16(b[((size_t)g * K + k) * N + n]);
	default:
		return float_from_bf16(b[((size_t)g * N + n) * K + k]);
	}
}

/* Relative Frobenius error over the rows of groups; *untouched_lost counts
 * rows of no group whose D lost the sentinel (reported, not judged: DeepGEMM
 * does not promise to leave them). */
static double relative_error(const struct problem *p, uint32_t *untouched_lost)
{
	double diff = 0, norm = 0;
	double *a = xcalloc((size_t)p->rows * K, sizeof *a), *b = xcalloc((size_t)G * N * K, sizeof *b);

	/* Decoded once: the loop below runs rows x N x K times. */
	for (uint32_t r = 0; r < p->rows; r++)
		for (uint32_t k = 0; k < K; k++)
			a[(size_t)r * K + k] = a_at(p, r, k);
	for (uint32_t g = 0; g < G; g++)
		for (uint32_t n = 0; n < N; n++)
			for (uint32_t k = 0; k < K; k++)
				b[((size_t)g * N + n) * K + k] = b_at(p, g, n, k);
	*untouched_lost = 0;
	for (uint32_t r = 0; r < p->rows; r++) {
		const uint16_t *d = p->d + (size_t)r * N;
		int g = p->row_group[r];
		if (g < 0) {
			for (int n = 0; n < N; n++)
				if (d[n] != d_sentinel) {
					++*untouched_lost;
					break;
				}
			continue;
		}
		for (uint32_t n = 0; n < N; n++) {
			double ref = 0;
			for (uint32_t kb = 0; kb < KB; kb++) {
				double part = 0;
				const double *ar = a + (size_t)r * K, *bn = b + ((size_t)g * N + n) * K;
				for (uint32_t k = kb * 128; k < kb * 128 + 128; k++)
					part += ar[k] * bn[k];
				if (p->dtype == DT_FP8)
					part *= (double)p->sf[(size_t)r * KB + kb] *
						p->sfb[((size_t)g * NB + n / 128) * KB + kb];
				ref += part;
			}
			double e = float_from_bf16(d[n]) - ref;
			diff += e * e;
			norm += ref * ref;
		}
	}
	free(a);
	free(b);
	return norm > 0 ? sqrt(diff / norm) : INFINITY;
}

/* ---- device side ---- */

struct operands {
	CUdeviceptr layout, a, b, d, sf, sfa, sfb;
	uint32_t sfa_rows;      /* align(m, 4): the TMA-aligned MN extent */
};

static CUdeviceptr alloc_upload(const void *host, size_t bytes)
{
	CUdeviceptr p = 0;
	if (!bytes)
		return 0;
	CHECK(drv.cuMemAlloc(&p, bytes));
	if (host)
		CHECK(drv.cuMemcpyHtoD(p, host, bytes));
	return p;
}

/* Allocates in the current context and uploads; D starts as the sentinel. */
static void upload(struct operands *o, struct problem *p)
{
	memset(o, 0, sizeof *o);
	for (size_t i = 0; i < (size_t)p->rows * N; i++)
		p->d[i] = d_sentinel;
	o->layout = alloc_upload(p->grouped, p->grouped_len * sizeof *p->grouped);
	o->a = alloc_upload(p->a, (size_t)p->rows * K * p->elem);
	o->b = alloc_upload(p->b, (size_t)G * N * K * p->elem);
	o->d = alloc_upload(p->d, (size_t)p->rows * N * sizeof *p->d);
	if (p->dtype == DT_FP8) {
		o->sfa_rows = align_up(p->m, 4);
		o->sf = alloc_upload(p->sf, (size_t)p->rows * KB * sizeof *p->sf);
		o->sfa = alloc_upload(NULL, (size_t)p->batches * KB * o->sfa_rows * sizeof(float));
		o->sfb = alloc_upload(p->sfb, (size_t)G * NB * KB * sizeof *p->sfb);
	}
}

/* Reads back D and A (a producer may have rewritten A). */
static void download(struct problem *p, const struct operands *o)
{
	CHECK(drv.cuMemcpyDtoH(p->a, o->a, (size_t)p->rows * K * p->elem));
	CHECK(drv.cuMemcpyDtoH(p->d, o->d, (size_t)p->rows * N * sizeof *p->d));
}

/* DeepGEMM's make_tma_2d_desc: 2-D, row stride in bytes, elem strides 1, no
 * interleave, L2 256B promotion, no OOB fill. */
static void encode(CUtensorMap *map, CUtensorMapDataType type, size_t elem, CUdeviceptr base,
		   uint64_t inner, uint64_t outer, uint64_t outer_stride, uint32_t box_inner,
		   uint32_t box_outer, CUtensorMapSwizzle swizzle)
{
	const cuuint64_t dims[2] = { inner, outer };
	const cuuint64_t strides[1] = { outer_stride * elem };
	const cuuint32_t box[2] = { box_inner, box_outer };
	const cuuint32_t elem_strides[2] = { 1, 1 };

	CHECK_GEMM(drv.cuTensorMapEncodeTiled(map, type, 2, (void *)base, dims, strides, box, elem_strides,
					      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
					      CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
					      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

struct kernels {
	CUfunction gemm, transpose;     /* fetched once, on device 0: DeepGEMM's cache */
};

static void launch(CUfunction f, unsigned gx, unsigned gy, unsigned threads, unsigned smem,
		   unsigned cluster, CUstream s, void **args, const char *kernel, const char *what)
{
	CUlaunchAttribute attrs[2];
	CUlaunchConfig cfg;

	memset(attrs, 0, sizeof attrs);
	memset(&cfg, 0, sizeof cfg);
	cfg.attrs = attrs;
	if (cluster > 1) {      /* DeepGEMM adds it only for multicast */
		attrs[cfg.numAttrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
		attrs[cfg.numAttrs].value.clusterDim.x = cluster;
		attrs[cfg.numAttrs].value.clusterDim.y = 1;
		attrs[cfg.numAttrs++].value.clusterDim.z = 1;
	}
	attrs[cfg.numAttrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	attrs[cfg.numAttrs++].value.programmaticStreamSerializationAllowed = 1;
	cfg.gridDimX = gx;
	cfg.gridDimY = gy;
	cfg.gridDimZ = 1;
	cfg.blockDimX = threads;
	cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.sharedMemBytes = smem;
	cfg.hStream = s;
	printf("deepgemm_redirect: launching %s (%s)\n", kernel, what);
	CHECK_GEMM(drv.cuLaunchKernelEx(&cfg, f, args, NULL));
	printf("deepgemm_redirect: launch returned CUDA_SUCCESS (%s)\n", what);
}

/* DeepGEMM's sm90 pipeline size (heuristics/sm90.hpp): the D tile, 256 bytes
 * of barriers, fp8's sfb of K's blocks, then STAGES of A and B (BLOCK_K *
 * elem = 128 bytes a row) and fp8's sfa; more than fixture::smem_bytes(). */
static unsigned gemm_smem(const struct problem *p)
{
	const unsigned fp8 = p->dtype == DT_FP8;
	return BLOCK_M * BLOCK_N * 2 + 256 + (fp8 ? (KB * 4 + 7) / 8 * 8 : 0) +
	       STAGES * (BLOCK_M * SWIZZLE + BLOCK_N * SWIZZLE + (fp8 ? BLOCK_M * 4 : 0));
}

/* One DeepGEMM API call on stream s of the current context (NULL: PyTorch's
 * default current stream). */
static void deepgemm_call(const struct kernels *kn, const struct problem *p, const struct operands *o,
			  CUstream s, const char *what)
{
	const int fp8 = p->dtype == DT_FP8;
	const CUtensorMapDataType type = fp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8   /* DeepGEMM's fp8 */
					     : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
	const uint32_t box_k = SWIZZLE / (uint32_t)p->elem;  /* swizzle_mode / elem_size */
	CUtensorMap map_a, map_b, map_d, map_sfa;
	uint32_t m = p->m, n = N, k = K;
	int *layout = (int *)(uintptr_t)o->layout;
	float *sfb = (float *)(uintptr_t)o->sfb;

	if (fp8) {      /* get_mn_major_tma_aligned_tensor(sfa): transpose_fp32<512, 64, SF_K> */
		const float *sf = (const float *)(uintptr_t)o->sf;
		float *out = (float *)(uintptr_t)o->sfa;
		void *targs[] = { &sf, &out, &m };
		launch(kn->transpose, (m + TRANSPOSE_BLOCK - 1) / TRANSPOSE_BLOCK, p->batches,
		       TRANSPOSE_THREADS, TRANSPOSE_SMEM, 1, s, targs, "transpose_fp32", what);
	}
	/* A Normal GEMM's B is one matrix (DeepGEMM's num_groups = 1): group 0. */
	uint64_t groups = p->layout == L_NORMAL ? 1 : G;
	encode(&map_a, type, p->elem, o->a, K, p->rows, K, box_k, BLOCK_M, CU_TENSOR_MAP_SWIZZLE_128B);
	if (p->dtype == DT_BF16_NN)
		encode(&map_b, type, p->elem, o->b, N, (uint64_t)K * groups, N, SWIZZLE / 2,
		       SWIZZLE / 2, CU_TENSOR_MAP_SWIZZLE_128B);    /* box {64, BLOCK_K = 64} */
	else
		encode(&map_b, type, p->elem, o->b, K, (uint64_t)N * groups, K, box_k, BLOCK_N,
		       CU_TENSOR_MAP_SWIZZLE_128B);
	encode(&map_d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, o->d, N, p->rows, N, SWIZZLE / 2, BLOCK_M,
	       CU_TENSOR_MAP_SWIZZLE_128B);
	if (fp8) {
		encode(&map_sfa, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, o->sfa, o->sfa_rows,
		       (uint64_t)KB * p->batches, o->sfa_rows, BLOCK_M, 1, CU_TENSOR_MAP_SWIZZLE_NONE);
		void *args[] = { &sfb, &layout, &m, &n, &k, &map_a, &map_b, &map_d, &map_sfa };
		launch(kn->gemm, NUM_SMS, 1, THREADS, gemm_smem(p), MULTICAST, s, args,
		       "sm90_fp8_gemm_1d2d_impl", what);
	} else {
		void *args[] = { &layout, &m, &n, &k, &map_a, &map_b, &map_d };
		launch(kn->gemm, NUM_SMS, 1, THREADS, gemm_smem(p), MULTICAST, s, args,
		       "sm90_bf16_gemm_impl", what);
	}
}

/* Checks D; EXIT_OK, or `bad` when the error is over the tolerance. */
static int verify(const struct problem *p, const char *what, int bad)
{
	const double tolerance = p->dtype == DT_FP8 ? 3e-2 : 1e-2;
	uint32_t untouched_lost;
	double rel = relative_error(p, &untouched_lost);

	printf("deepgemm_redirect: %s: rel error %.3g (tolerance %.0e), rows of no group written %u\n",
	       what, rel, tolerance, untouched_lost);
	if (rel <= tolerance)
		return EXIT_OK;
	printf("%s: rel error %.3g\n", bad == EXIT_CORRUPT ? "silent corruption" : "WRONG RESULT", rel);
	return bad;
}

/* CHAIN_LINKS kernels on stream s, each waiting link_spin_ns on the GPU clock
 * then rewriting all of A: device 1 "still producing the input". */
static void produce(CUfunction producer, const struct problem *p, CUdeviceptr a, CUstream s)
{
	uint64_t count = (uint64_t)p->rows * K, spin = link_spin_ns;
	uint32_t fp8 = p->dtype == DT_FP8;
	CUlaunchConfig cfg;

	memset(&cfg, 0, sizeof cfg);
	cfg.gridDimX = NUM_SMS;
	cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = 256;
	cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.hStream = s;
	for (uint32_t seed = 10; seed < 10 + CHAIN_LINKS; seed++) {
		void *args[] = { &a, &count, &spin, &seed, &fp8 };
		CHECK(drv.cuLaunchKernelEx(&cfg, producer, args, NULL));
	}
	printf("deepgemm_redirect: producer chain on device 1 (%s stream): %d links, %.0f ms\n",
	       s ? "a non-blocking side" : "the legacy default", CHAIN_LINKS,
	       CHAIN_LINKS * (double)link_spin_ns / 1e6);
}

/* After a warm-up call (as PyTorch asks before capturing), the call captured
 * on a non-blocking stream of device 0 (current), the graph launched; D reset
 * to the sentinel on device 1; launched again.  What is checked afterwards is
 * the replay's D. */
static void capture_and_replay(const struct kernels *kn, const struct problem *p,
			       const struct operands *o, CUcontext ctx[2], const char *what)
{
	CUstream s;
	CUgraph graph;
	CUgraphExec exec;

	CHECK(drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	deepgemm_call(kn, p, o, s, "warm-up before capture");
	CHECK_GEMM(drv.cuStreamSynchronize(s));
	CHECK_GEMM(drv.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	deepgemm_call(kn, p, o, s, what);
	CHECK_GEMM(drv.cuStreamEndCapture(s, &graph));
	CHECK_GEMM(drv.cuGraphInstantiate(&exec, graph, 0));
	CHECK_GEMM(drv.cuGraphLaunch(exec, s));
	CHECK_GEMM(drv.cuStreamSynchronize(s));
	CHECK(drv.cuCtxSetCurrent(ctx[1]));
	CHECK(drv.cuMemsetD16(o->d, d_sentinel, (size_t)p->rows * N));
	CHECK(drv.cuCtxSynchronize());
	CHECK(drv.cuCtxSetCurrent(ctx[0]));
	CHECK_GEMM(drv.cuGraphLaunch(exec, s));
	CHECK_GEMM(drv.cuStreamSynchronize(s));
	printf("deepgemm_redirect: graph captured, launched, D reset, replayed\n");
}

static int enable_peers(CUcontext ctx[2], CUdevice dev[2])
{
	int p01 = 0, p10 = 0;

	CHECK(drv.cuDeviceCanAccessPeer(&p01, dev[0], dev[1]));
	CHECK(drv.cuDeviceCanAccessPeer(&p10, dev[1], dev[0]));
	if (!p01 || !p10) {
		printf("deepgemm_redirect: needs peer access between devices 0 and 1 (%d, %d)\n",
		       p01, p10);
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		CHECK(drv.cuCtxSetCurrent(ctx[i]));
		CUresult e = drv.cuCtxEnablePeerAccess(ctx[1 - i], 0);
		if (e != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
			CHECK(e);
	}
	return 1;
}

/* The situation's call: operands on device 1; the current device and the
 * producer as the situation says. */
static int run_situation(int situation, const struct kernels *kn, CUlibrary lib, CUcontext ctx[2],
			 CUdevice dev[2], struct problem *p)
{
	struct operands t;
	CUstream side = NULL;
	CUkernel producer_kernel;
	CUfunction producer;
	char what[96];

	if (situation != S_HANDLE && !enable_peers(ctx, dev))
		return EXIT_UNAVAILABLE;
	CHECK(drv.cuCtxSetCurrent(ctx[1]));
	upload(&t, p);
	CHECK(drv.cuCtxSynchronize());
	if (situation == S_RACE_DEFAULT || situation == S_RACE_SIDE) {
		CHECK(drv.cuLibraryGetKernel(&producer_kernel, lib, producer_name));
		CHECK(drv.cuKernelGetFunction(&producer, producer_kernel));    /* device 1's own work */
		if (situation == S_RACE_SIDE)
			CHECK(drv.cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
		produce(producer, p, t.a, side);
		CUresult q = drv.cuStreamQuery(side);
		printf("deepgemm_redirect: producer still running at the call: %s\n",
		       q == CUDA_ERROR_NOT_READY ? "yes" : "no");
	}
	snprintf(what, sizeof what, "%s, current device %d, operands on device 1",
		 situation_names[situation], situation == S_HANDLE ? 1 : 0);
	volatile uint32_t *flag = NULL;
	if (situation == S_BLOCKED) {
		CUstream waiter;
		CHECK(drv.cuStreamCreate(&waiter, CU_STREAM_NON_BLOCKING));
		CHECK(drv.cuMemAllocHost((void **)&flag, sizeof *flag));
		*flag = 0;
		CHECK(drv.cuStreamWaitValue32(waiter, (CUdeviceptr)(uintptr_t)flag, 1,
					      CU_STREAM_WAIT_VALUE_GEQ));
	}
	CHECK(drv.cuCtxSetCurrent(ctx[situation == S_HANDLE ? 1 : 0]));
	if (situation == S_CAPTURE)
		capture_and_replay(kn, p, &t, ctx, what);
	else
		deepgemm_call(kn, p, &t, NULL, what);
	if (flag) {
		/* The launch stream's next work releases device 1's waiter. */
		CHECK(drv.cuStreamWriteValue32(NULL, (CUdeviceptr)(uintptr_t)flag, 1, 0));
		int spins = 0;
		while (drv.cuStreamQuery(NULL) == CUDA_ERROR_NOT_READY && spins++ < 5000)
			usleep(1000);
		if (spins > 5000) {
			printf("deepgemm_redirect: blocked: the launch stream did not finish in 5 s "
			       "(device 1's waiter needs the launch stream's later write); released "
			       "from the host\n");
			*flag = 1;
			CHECK_GEMM(drv.cuCtxSynchronize());
			CHECK(drv.cuCtxSetCurrent(ctx[1]));
			CHECK_GEMM(drv.cuCtxSynchronize());
			download(p, &t);
			int v = verify(p, situation_names[situation], EXIT_CORRUPT);
			return v == EXIT_OK ? EXIT_BLOCKED : v;
		}
	}
	CHECK_GEMM(drv.cuCtxSynchronize());
	CHECK(drv.cuCtxSetCurrent(ctx[1]));
	CHECK_GEMM(drv.cuCtxSynchronize());
	download(p, &t);
	return verify(p, situation_names[situation], EXIT_CORRUPT);
}

static int parse(const char *arg, const char *const *names, int count)
{
	for (int i = 0; i < count; i++)
		if (strcmp(arg, names[i]) == 0)
			return i;
	return -1;
}

int main(int argc, char **argv)
{
	const char *cubin = argc > 4 ? argv[4] : "build/gpu/deepgemm_sm90.cubin";
	int dtype = -1, layout = -1, situation = -1, ndev = 0, rc;
	CUdevice dev[2];
	CUcontext ctx[2];
	CUlibrary lib;
	CUkernel k;
	struct kernels kn = { 0 };
	struct problem p;
	struct operands t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 || argc == 5) {
		dtype = parse(argv[1], dtype_names, 3);
		layout = parse(argv[2], layout_names, 4);
		situation = parse(argv[3], situation_names, 7);
	}
	if (dtype < 0 || layout < 0 || situation < 0 || !gemm_names[dtype][layout]) {
		fprintf(stderr, "usage: %s bf16|bf16nn|fp8 normal|contiguous|psum|masked "
				"same|silent|race-default|race-side|handle|capture [CUBIN]\n"
				"(bf16nn: contiguous only)\n", argv[0]);
		return EXIT_SETUP;
	}
	printf("deepgemm_redirect: %s %s %s\n", dtype_names[dtype], layout_names[layout],
	       situation_names[situation]);

	load_driver();
	CHECK(drv.cuInit(0));
	CHECK(drv.cuDeviceGetCount(&ndev));
	if (situation != S_SAME && ndev < 2) {
		printf("deepgemm_redirect: %s needs 2 devices, found %d\n", situation_names[situation],
		       ndev);
		return EXIT_UNAVAILABLE;
	}
	for (int i = 0; i < (situation == S_SAME ? 1 : 2); i++) {
		CHECK(drv.cuDeviceGet(&dev[i], i));
		CHECK(drv.cuDevicePrimaryCtxRetain(&ctx[i], dev[i]));
	}

	/* DeepGEMM's first call, on device 0: load, bind, cache, run. */
	CHECK(drv.cuCtxSetCurrent(ctx[0]));
	CHECK(drv.cuLibraryLoadFromFile(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
	CHECK(drv.cuLibraryGetKernel(&k, lib, gemm_names[dtype][layout]));
	CHECK(drv.cuKernelGetFunction(&kn.gemm, k));
	make_problem(&p, dtype, layout);
	CHECK(drv.cuFuncSetAttribute(kn.gemm, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
				     (int)gemm_smem(&p)));
	if (dtype == DT_FP8) {
		CHECK(drv.cuLibraryGetKernel(&k, lib, transpose_name));
		CHECK(drv.cuKernelGetFunction(&kn.transpose, k));
		CHECK(drv.cuFuncSetAttribute(kn.transpose, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					     TRANSPOSE_SMEM));
	}
	printf("deepgemm_redirect: m %u, n %d, k %d, groups %u, rows %u\n", p.m, N, K, p.groups, p.rows);
	upload(&t0, &p);
	deepgemm_call(&kn, &p, &t0, NULL, "first call, device 0, operands on device 0");
	CHECK_GEMM(drv.cuCtxSynchronize());
	download(&p, &t0);
	rc = verify(&p, "device 0", EXIT_WRONG);
	if (rc == EXIT_OK && situation != S_SAME)
		rc = run_situation(situation, &kn, lib, ctx, dev, &p);
	if (rc == EXIT_OK)
		printf("deepgemm_redirect: ok\n");
	free_problem(&p);
	return rc;
}
