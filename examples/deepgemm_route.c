/* deepgemm_route -- DeepGEMM's driver route, step for step, in C.
 *
 * DeepGEMM (csrc/jit) reaches libcuda only through dlopen("libcuda.so.1") +
 * dlsym, loads each JIT cubin with cuLibraryLoadFromFile, turns its kernel
 * into a CUfunction with cuKernelGetFunction in whatever context is current,
 * caches it process-wide with no device in the key, and launches it with
 * cuLaunchKernelEx (cluster + programmatic-serialization attributes) on the
 * current device's stream, operands passed as TMA descriptors built by
 * cuTensorMapEncodeTiled.  This program does the same with the fixture
 * kernels/fixtures/deepgemm_abi.cu (same mangled-name prefix and ABI), so the
 * failure that made transformers disable DeepGEMM on multi-GPU models can be
 * reproduced -- and ctxguard tested -- without Python or DeepGEMM.
 *
 * usage: deepgemm_route [--created] same|cross|silent|silent_tmap [CUBIN]
 *        (default CUBIN: build/gpu/deepgemm_abi.cubin)
 *   --created  "device 1" below is a context made by cuCtxCreate on device 0
 *           (one GPU is enough for cross; silent needs a second device)
 *   every mode first runs the GEMM on device 0 (DeepGEMM's first call, which
 *   fills its kernel cache) and checks it against a CPU reference; then
 *   same    stops there;
 *   cross   switches the current device to 1 (torch.cuda.set_device(1)), puts
 *           the tensors on device 1 and launches the cached device-0 CUfunction
 *           on the current (NULL) stream: the driver refuses, INVALID_HANDLE;
 *   silent  leaves the current device at 0 (what device_map does) with the
 *           tensors on device 1 and peer access on both ways, while a producer
 *           kernel on device 1's stream is still rewriting A: the GEMM runs on
 *           GPU 0, unordered with GPU 1, and D is checked against the
 *           reference computed from the final A.
 *   silent_tmap  the same with grouped_layout on device 0: only the TMA
 *           descriptors point at the other GPU.
 *
 * exit codes:
 *   0  correct result (same; cross/silent when the result happens to match)
 *   1  usage or set-up failure (arguments, cubin, any other driver call)
 *   2  wrong result from the device-0 GEMM (fixture or route broken)
 *   3  CUDA driver error from a GEMM launch or the synchronisation after it,
 *      printed on stderr as DeepGEMM's DG_CUDA_DRIVER_CHECK formats it
 *   4  silent corruption: D differs from the reference of the final A
 *   5  not reproducible here: fewer than 2 devices, or no peer access, or
 *      silent with --created
 * Progress goes to stdout (line-buffered, so it survives an abort); stderr
 * carries only driver errors, so ctxguard's report is its first line.
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum mode { MODE_SAME, MODE_CROSS, MODE_SILENT, MODE_SILENT_TMAP };

/* Problem size: G experts, rows padded to 128 per expert (M = 512). */
enum { G = 4, ROW_ALIGN = 128, N = 256, K = 512 };
static const int expert_rows[G] = { 100, 128, 37, 90 };

/* The fixture's launch contract (see deepgemm_abi.cu). */
enum { BLOCK = 64, THREADS = 256, SMEM_BYTES = 3 * BLOCK * BLOCK * 2 + 128 };
static const char gemm_prefix[] = "_ZN9deep_gemm";
static const char producer_name[] = "ctxguard_fixture_producer";
static const uint64_t producer_spin_ns = 100000000;   /* 100 ms: the GEMM reads A well before */
static const uint16_t d_sentinel = 0xDEAD;              /* padding rows must keep it */
static const double tolerance = 1e-2;                   /* bf16 output rounding is ~3e-3 */

/* Every driver entry point used, resolved by dlsym as DeepGEMM does. */
#define DG_PROG "deepgemm_route"
#define DRIVER_CALLS(X) \
	X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDeviceGet) \
	X(cuDeviceGetCount) X(cuDeviceCanAccessPeer) X(cuDevicePrimaryCtxRetain) \
	X(cuCtxCreate) X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuCtxEnablePeerAccess) \
	X(cuMemAlloc) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuStreamCreate) \
	X(cuStreamSynchronize) X(cuLibraryLoadFromFile) X(cuLibraryGetKernelCount) \
	X(cuLibraryEnumerateKernels) X(cuKernelGetName) X(cuKernelGetFunction) \
	X(cuFuncSetAttribute) X(cuTensorMapEncodeTiled) X(cuLaunchKernelEx)
#include "deepgemm_host.h"

/* ---- host data: bf16 as raw bits, deterministic values ---- */

struct problem {
	uint32_t m;            /* rows after padding */
	int *layout;           /* [m]: expert id, -1 for padding */
	uint16_t *a;           /* [m][K] */
	uint16_t *b;           /* [G][N][K] */
	uint16_t *d;           /* [m][N], what came back from the device */
};

static void fill_bf16(uint16_t *x, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		x[i] = bf16_from_float(unit_hash(i, seed));
}

static uint32_t padded_rows(int g)
{
	return (uint32_t)(expert_rows[g] + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
}

static void make_problem(struct problem *p)
{
	uint32_t m = 0;

	for (int g = 0; g < G; g++)
		m += padded_rows(g);
	p->m = m;
	p->layout = xcalloc(m, sizeof *p->layout);
	p->a = xcalloc((size_t)m * K, sizeof *p->a);
	p->b = xcalloc((size_t)G * N * K, sizeof *p->b);
	p->d = xcalloc((size_t)m * N, sizeof *p->d);
	for (uint32_t row = 0, g = 0; g < G; g++)
		for (uint32_t r = 0; r < padded_rows((int)g); r++)
			p->layout[row++] = r < (uint32_t)expert_rows[g] ? (int)g : -1;
	fill_bf16(p->a, (size_t)m * K, 1);
	fill_bf16(p->b, (size_t)G * N * K, 2);
}

static void free_problem(struct problem *p)
{
	free(p->layout);
	free(p->a);
	free(p->b);
	free(p->d);
}

/* Relative Frobenius error of D over the experts' rows against the reference
 * from p->a; *padding_written counts padding rows that lost the sentinel. */
static double relative_error(const struct problem *p, uint32_t *padding_written)
{
	double diff = 0, norm = 0;

	*padding_written = 0;
	for (uint32_t m = 0; m < p->m; m++) {
		const uint16_t *d = p->d + (size_t)m * N;
		int g = p->layout[m];
		if (g < 0) {
			for (int n = 0; n < N; n++)
				if (d[n] != d_sentinel) {
					++*padding_written;
					break;
				}
			continue;
		}
		for (int n = 0; n < N; n++) {
			const uint16_t *a = p->a + (size_t)m * K;
			const uint16_t *b = p->b + ((size_t)g * N + (size_t)n) * K;
			double ref = 0;
			for (int k = 0; k < K; k++)
				ref += (double)float_from_bf16(a[k]) * float_from_bf16(b[k]);
			double e = float_from_bf16(d[n]) - ref;
			diff += e * e;
			norm += ref * ref;
		}
	}
	return norm > 0 ? sqrt(diff / norm) : INFINITY;
}

/* ---- device side ---- */

struct operands {
	CUdeviceptr layout, a, b, d;
};

/* Allocates in the current context and uploads; D starts as the sentinel. */
static void upload(struct operands *o, struct problem *p)
{
	size_t la = (size_t)p->m * sizeof *p->layout, sa = (size_t)p->m * K * 2;
	size_t sb = (size_t)G * N * K * 2, sd = (size_t)p->m * N * 2;

	for (size_t i = 0; i < (size_t)p->m * N; i++)
		p->d[i] = d_sentinel;
	CHECK(drv.cuMemAlloc(&o->layout, la));
	CHECK(drv.cuMemAlloc(&o->a, sa));
	CHECK(drv.cuMemAlloc(&o->b, sb));
	CHECK(drv.cuMemAlloc(&o->d, sd));
	CHECK(drv.cuMemcpyHtoD(o->layout, p->layout, la));
	CHECK(drv.cuMemcpyHtoD(o->a, p->a, sa));
	CHECK(drv.cuMemcpyHtoD(o->b, p->b, sb));
	CHECK(drv.cuMemcpyHtoD(o->d, p->d, sd));
}

/* Reads back D and, since a producer may have rewritten it, A. */
static void download(struct problem *p, const struct operands *o)
{
	CHECK(drv.cuMemcpyDtoH(p->a, o->a, (size_t)p->m * K * 2));
	CHECK(drv.cuMemcpyDtoH(p->d, o->d, (size_t)p->m * N * 2));
}

/* Row-major bf16 matrix [outer][inner] as a 2-D tiled TMA descriptor. */
static void encode(CUtensorMap *map, CUdeviceptr base, uint64_t inner, uint64_t outer,
		   uint32_t box_inner, uint32_t box_outer)
{
	const cuuint64_t dims[2] = { inner, outer };
	const cuuint64_t strides[1] = { inner * 2 };
	const cuuint32_t box[2] = { box_inner, box_outer };
	const cuuint32_t elem_strides[2] = { 1, 1 };

	CHECK(drv.cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base,
					 dims, strides, box, elem_strides,
					 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
					 CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
					 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

static void find_kernel(CUkernel *out, CUlibrary lib, const char *name, size_t match_len)
{
	unsigned int count = 0;

	/* DeepGEMM's JIT cubins hold exactly one kernel; the fixture holds three
	 * (GEMM, producer, empty), so pick by name. */
	CHECK(drv.cuLibraryGetKernelCount(&count, lib));
	CUkernel *kernels = xcalloc(count ? count : 1, sizeof *kernels);
	if (count)
		CHECK(drv.cuLibraryEnumerateKernels(kernels, count, lib));
	for (unsigned int i = 0; i < count; i++) {
		const char *kname = NULL;
		CHECK(drv.cuKernelGetName(&kname, kernels[i]));
		if (kname && strncmp(kname, name, match_len) == 0) {
			*out = kernels[i];
			free(kernels);
			return;
		}
	}
	fprintf(stderr, "deepgemm_route: no kernel named %s* among the cubin's %u\n", name, count);
	free(kernels);
	exit(EXIT_SETUP);
}

/* DeepGEMM's launch: dynamic smem attribute set on every call, cluster and
 * programmatic stream serialization attributes, descriptors encoded from
 * the tensors' addresses, the current stream. */
static void launch_gemm(CUfunction gemm, const struct operands *o, uint32_t m, CUstream stream,
			const char *what)
{
	CUtensorMap map_a, map_b, map_cd;
	uint32_t shape_m = m, shape_n = N, shape_k = K;
	int *grouped_layout = (int *)(uintptr_t)o->layout;
	void *args[] = { &grouped_layout, &shape_m, &shape_n, &shape_k, &map_a, &map_b, &map_cd };
	CUlaunchAttribute attrs[2];
	CUlaunchConfig cfg;

	encode(&map_a, o->a, K, m, BLOCK, BLOCK);
	encode(&map_b, o->b, K, (uint64_t)G * N, BLOCK, BLOCK);
	encode(&map_cd, o->d, N, m, BLOCK, 1);
	memset(attrs, 0, sizeof attrs);
	attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	attrs[0].value.clusterDim.x = 1;
	attrs[0].value.clusterDim.y = 1;
	attrs[0].value.clusterDim.z = 1;
	attrs[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	attrs[1].value.programmaticStreamSerializationAllowed = 1;
	memset(&cfg, 0, sizeof cfg);
	cfg.gridDimX = (m + BLOCK - 1) / BLOCK * ((N + BLOCK - 1) / BLOCK);
	cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = THREADS;
	cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.sharedMemBytes = SMEM_BYTES;
	cfg.hStream = stream;
	cfg.attrs = attrs;
	cfg.numAttrs = 2;

	printf("deepgemm_route: launching sm90_bf16_gemm_impl (%s)\n", what);
	CHECK_GEMM(drv.cuFuncSetAttribute(gemm, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					  SMEM_BYTES));
	CHECK_GEMM(drv.cuLaunchKernelEx(&cfg, gemm, args, NULL));
	printf("deepgemm_route: launch returned CUDA_SUCCESS (%s)\n", what);
}

static void launch_producer(CUfunction producer, CUdeviceptr a, uint64_t count, CUstream stream)
{
	uint64_t spin = producer_spin_ns;
	uint32_t seed = 3;
	void *args[] = { &a, &count, &spin, &seed };
	CUlaunchConfig cfg;

	memset(&cfg, 0, sizeof cfg);
	cfg.gridDimX = 64;
	cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = 256;
	cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.hStream = stream;
	CHECK(drv.cuLaunchKernelEx(&cfg, producer, args, NULL));
}

/* Checks D of a GEMM that was expected to be right; EXIT_OK or EXIT_WRONG. */
static int verify(const struct problem *p, const char *what)
{
	uint32_t padding_written;
	double rel = relative_error(p, &padding_written);

	printf("deepgemm_route: %s: rel error %.3g, padding rows written %u\n", what, rel,
	       padding_written);
	if (rel <= tolerance && padding_written == 0)
		return EXIT_OK;
	printf("deepgemm_route: %s: WRONG RESULT\n", what);
	return EXIT_WRONG;
}

static void enable_peer(CUcontext from, CUcontext to)
{
	CHECK(drv.cuCtxSetCurrent(from));
	CUresult e = drv.cuCtxEnablePeerAccess(to, 0);
	if (e != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
		CHECK(e);
}

/* Device 1 (or the created context) is current, the tensors live there,
 * the cached CUfunction is device 0's primary context's: the driver answers
 * CUDA_ERROR_INVALID_HANDLE. */
static int run_cross(CUfunction gemm, const struct contexts *c, struct problem *p)
{
	struct operands t;
	char what[128];

	CHECK(drv.cuCtxSetCurrent(c->ctx[1]));
	upload(&t, p);
	snprintf(what, sizeof what, "device 0 function, %s current, tensors on %s", c->second, c->second);
	launch_gemm(gemm, &t, p->m, NULL, what);
	CHECK_GEMM(drv.cuCtxSynchronize());
	download(p, &t);
	return verify(p, "cross");
}

/* Device 0 stays current, the tensors live on device 1 and are still being
 * produced there: GPU 0 reads A before device 1's stream rewrites it. */
static int run_silent(CUfunction gemm, CUfunction producer, CUcontext ctx[2], CUdevice dev[2],
		      struct problem *p, CUdeviceptr layout0)
{
	struct operands t;
	CUstream stream1;
	int peer01 = 0, peer10 = 0;
	uint32_t padding_written;

	CHECK(drv.cuDeviceCanAccessPeer(&peer01, dev[0], dev[1]));
	CHECK(drv.cuDeviceCanAccessPeer(&peer10, dev[1], dev[0]));
	if (!peer01 || !peer10) {
		printf("deepgemm_route: silent needs peer access between devices 0 and 1 (%d, %d)\n",
		       peer01, peer10);
		return EXIT_UNAVAILABLE;
	}
	enable_peer(ctx[0], ctx[1]);
	enable_peer(ctx[1], ctx[0]);

	CHECK(drv.cuCtxSetCurrent(ctx[1]));
	upload(&t, p);
	if (layout0)
		t.layout = layout0;   /* the same routing, kept on device 0 */
	CHECK(drv.cuStreamCreate(&stream1, CU_STREAM_NON_BLOCKING));
	launch_producer(producer, t.a, (uint64_t)p->m * K, stream1);
	printf("deepgemm_route: producer on device 1 rewrites A after %.0f ms\n",
	       (double)producer_spin_ns / 1e6);

	CHECK(drv.cuCtxSetCurrent(ctx[0]));
	launch_gemm(gemm, &t, p->m, NULL,
		    layout0 ? "device 0 function and stream, tensors on device 1, grouped_layout on device 0"
			    : "device 0 function and stream, tensors on device 1");
	CHECK_GEMM(drv.cuCtxSynchronize());
	CHECK(drv.cuCtxSetCurrent(ctx[1]));
	CHECK(drv.cuStreamSynchronize(stream1));
	download(p, &t);

	double rel = relative_error(p, &padding_written);
	printf("deepgemm_route: silent: rel error %.3g against the reference from the final A, "
	       "padding rows written %u\n", rel, padding_written);
	if (rel <= tolerance && padding_written == 0)
		return EXIT_OK;
	printf("silent corruption: rel error %.3g\n", rel);
	return EXIT_CORRUPT;
}

int main(int argc, char **argv)
{
	static const char *const modes[] = { [MODE_SAME] = "same", [MODE_CROSS] = "cross",
					     [MODE_SILENT] = "silent", [MODE_SILENT_TMAP] = "silent_tmap" };
	const char *cubin;
	int mode = -1, rc;
	struct contexts c;
	CUlibrary lib;
	CUkernel gemm_kernel, producer_kernel;
	CUfunction gemm, producer;
	struct problem p;
	struct operands t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_created(&c, &argc, &argv);
	cubin = argc > 2 ? argv[2] : "build/gpu/deepgemm_abi.cubin";
	for (int i = 0; i < 4 && (argc == 2 || argc == 3); i++)
		if (strcmp(argv[1], modes[i]) == 0)
			mode = i;
	if (mode < 0) {
		fprintf(stderr, "usage: %s [--created] same|cross|silent|silent_tmap [CUBIN]\n", argv[0]);
		return EXIT_SETUP;
	}

	load_driver();
	CHECK(drv.cuInit(0));
	if ((mode == MODE_SILENT || mode == MODE_SILENT_TMAP) && needs_second_device(&c, modes[mode]))
		return EXIT_UNAVAILABLE;
	if ((rc = open_contexts(&c, mode == MODE_SAME ? 1 : 2, modes[mode])) != EXIT_OK)
		return rc;

	/* DeepGEMM's first call, on device 0: load, bind, cache, run. */
	CHECK(drv.cuLibraryLoadFromFile(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
	find_kernel(&gemm_kernel, lib, gemm_prefix, strlen(gemm_prefix));
	CHECK(drv.cuKernelGetFunction(&gemm, gemm_kernel));

	make_problem(&p);
	upload(&t0, &p);
	launch_gemm(gemm, &t0, p.m, NULL, "device 0, tensors on device 0");
	CHECK_GEMM(drv.cuCtxSynchronize());
	download(&p, &t0);
	rc = verify(&p, "device 0");

	if (rc == EXIT_OK && mode == MODE_CROSS)
		rc = run_cross(gemm, &c, &p);
	if (rc == EXIT_OK && (mode == MODE_SILENT || mode == MODE_SILENT_TMAP)) {
		CHECK(drv.cuCtxSetCurrent(c.ctx[1]));
		find_kernel(&producer_kernel, lib, producer_name, sizeof producer_name);
		CHECK(drv.cuKernelGetFunction(&producer, producer_kernel));
		rc = run_silent(gemm, producer, c.ctx, c.dev, &p, mode == MODE_SILENT_TMAP ? t0.layout : 0);
	}
	free_problem(&p);
	return rc;
}
