/* The contexts-on-one-device truth table, measured: one row per run.
 *   ctx_table PTX ROW     prints "ROW launch=<CUresult> sync=<CUresult> result=<right|wrong|none>"
 *   ctx_table PTX list    prints the row names
 *   ctx_table PTX facts   prints the other driver answers ctxguard relies on
 * A row the device cannot set up (SM-count affinity without MPS) prints
 * "ROW unsupported=<CUresult>" and exits 3.
 * PTX holds `add1(int *p, int n)` (tests/gpu/ctx_table.cu).  Each row loads
 * it in one context (or as a context-independent CUkernel), launches it in
 * another of the same device, and checks that every element went up by one.
 * Run plainly it gives the driver's verdict; under ctxguard
 * (tests/gpu/cases/19_ctx_table.sh) ctxguard's, and the two must agree:
 * a crossing is reported exactly where the driver refuses or computes
 * wrongly.  Links libcuda directly, so a preloaded ctxguard sees every call. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096

static const char *ptx;
static CUdevice dev;
static CUcontext primary;

static void die(const char *what, CUresult rc)
{
	const char *name = NULL;
	cuGetErrorName(rc, &name);
	fprintf(stderr, "ctx_table: %s: %s\n", what, name ? name : "?");
	exit(2);
}

#define TRY(call) do { CUresult rc_ = (call); if (rc_ != CUDA_SUCCESS) die(#call, rc_); } while (0)

static const char *err_name(CUresult rc)
{
	const char *name = NULL;
	return cuGetErrorName(rc, &name) == CUDA_SUCCESS && name ? name : "?";
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(2);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *b = malloc((size_t)n + 1);
	if (!b || fread(b, 1, (size_t)n, f) != (size_t)n)
		exit(2);
	b[n] = 0;
	fclose(f);
	return b;
}

/* The module's add1, loaded in whatever context is current. */
static CUfunction load_here(void)
{
	CUmodule m;
	CUfunction f;
	TRY(cuModuleLoadData(&m, ptx));
	TRY(cuModuleGetFunction(&f, m, "add1"));
	return f;
}

/* One of two green contexts over disjoint halves of the device's SMs. */
static CUgreenCtx green(int which)
{
	static CUgreenCtx g[2];
	if (g[which])
		return g[which];
	CUdevResource sm, parts[2], rest;
	unsigned nb = 2;
	TRY(cuDeviceGetDevResource(dev, &sm, CU_DEV_RESOURCE_TYPE_SM));
	TRY(cuDevSmResourceSplitByCount(parts, &nb, &sm, &rest, 0, 8));
	if (nb < 2)
		die("cuDevSmResourceSplitByCount gave fewer than two groups", CUDA_ERROR_INVALID_VALUE);
	for (int i = 0; i < 2; i++) {
		CUdevResourceDesc d;
		TRY(cuDevResourceGenerateDesc(&d, &parts[i], 1));
		TRY(cuGreenCtxCreate(&g[i], d, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	}
	return g[which];
}

static CUcontext green_ctx(int which)
{
	CUcontext c;
	TRY(cuCtxFromGreenCtx(&c, green(which)));
	return c;
}

static CUstream green_stream(int which)
{
	CUstream s;
	TRY(cuGreenCtxStreamCreate(&s, green(which), CU_STREAM_NON_BLOCKING, 0));
	return s;
}

static CUstream primary_stream(void)
{
	CUstream s;
	TRY(cuCtxSetCurrent(primary));
	TRY(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	return s;
}

static const char *row;

static CUcontext created(int sm_limit)
{
	CUcontext c, was;
	TRY(cuCtxGetCurrent(&was));
	if (sm_limit) {
		CUexecAffinityParam p = {.type = CU_EXEC_AFFINITY_TYPE_SM_COUNT,
					 .param.smCount.val = (unsigned)sm_limit};
		CUctxCreateParams cp = {.execAffinityParams = &p, .numExecAffinityParams = 1};
		CUresult rc = cuCtxCreate(&c, &cp, 0, dev);
		/* SM-count affinity needs MPS on most devices: no row to measure */
		if (rc == CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY) {
			printf("%s unsupported=%s\n", row, err_name(rc));
			exit(3);
		}
		if (rc != CUDA_SUCCESS)
			die("cuCtxCreate with an SM-count affinity", rc);
	} else {
		TRY(cuCtxCreate(&c, NULL, 0, dev));
	}
	TRY(cuCtxSetCurrent(was));
	return c;
}

static CUdeviceptr buf;

/* Launch f on s with `launch_ctx` current; what the driver says. */
static CUresult launch(CUfunction f, CUcontext launch_ctx, CUstream s, CUdeviceptr p)
{
	int n = N;
	void *args[] = {&p, &n};
	TRY(cuCtxSetCurrent(launch_ctx));
	return cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, s, args, NULL);
}

static int report(CUresult lrc, CUdeviceptr p, CUcontext owner_of_p)
{
	CUresult src = cuCtxSynchronize();
	TRY(cuCtxSetCurrent(owner_of_p));
	CUresult s2 = cuCtxSynchronize();
	if (src == CUDA_SUCCESS)
		src = s2;
	int *h = malloc(N * sizeof *h);
	const char *result = "none";
	if (cuMemcpyDtoH(h, p, N * sizeof *h) == CUDA_SUCCESS) {
		int ones = 0;
		for (int i = 0; i < N; i++)
			ones += h[i] == 1;
		result = ones == N ? "right" : ones == 0 && lrc != CUDA_SUCCESS ? "none" : "wrong";
	}
	printf("%s launch=%s sync=%s result=%s\n", row, err_name(lrc), err_name(src), result);
	free(h);
	return 0;
}

static CUdeviceptr zeroed(void)
{
	CUdeviceptr p;
	TRY(cuMemAlloc(&p, N * sizeof(int)));
	TRY(cuMemsetD32(p, 0, N));
	return p;
}

/* A graph of one add1 launch, captured on s. */
static CUgraphExec captured(CUfunction f, CUstream s, CUcontext ctx)
{
	CUgraph g;
	CUgraphExec e;
	TRY(cuCtxSetCurrent(ctx));
	TRY(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CUresult lrc = launch(f, ctx, s, buf);
	TRY(cuStreamEndCapture(s, &g));
	if (lrc != CUDA_SUCCESS)
		die("launch under capture", lrc);
	TRY(cuGraphInstantiate(&e, g, 0));
	return e;
}

static int run_row(const char *r)
{
	row = r;
	CUfunction f;
	CUstream s;
#define ROW(name) if (!strcmp(r, name))
	ROW("green_current_primary_module") {
		f = load_here();
		return report(launch(f, green_ctx(0), NULL, buf), buf, primary);
	}
	ROW("green_module_primary_stream") {
		TRY(cuCtxSetCurrent(green_ctx(0)));
		f = load_here();
		s = primary_stream();
		return report(launch(f, primary, s, buf), buf, primary);
	}
	ROW("green_stream_primary_module") {
		f = load_here();
		return report(launch(f, primary, green_stream(0), buf), buf, primary);
	}
	ROW("green_module_other_green_stream") {
		TRY(cuCtxSetCurrent(green_ctx(0)));
		f = load_here();
		s = green_stream(1);
		return report(launch(f, green_ctx(1), s, buf), buf, primary);
	}
	ROW("green_kernel_library") {
		CUlibrary l;
		CUkernel k;
		TRY(cuLibraryLoadData(&l, ptx, NULL, NULL, 0, NULL, NULL, 0));
		TRY(cuLibraryGetKernel(&k, l, "add1"));
		return report(launch((CUfunction)k, green_ctx(1), green_stream(1), buf), buf, primary);
	}
	ROW("green_kernel_get_function") {
		CUlibrary l;
		CUkernel k;
		TRY(cuLibraryLoadData(&l, ptx, NULL, NULL, 0, NULL, NULL, 0));
		TRY(cuLibraryGetKernel(&k, l, "add1"));
		TRY(cuCtxSetCurrent(green_ctx(0)));
		TRY(cuKernelGetFunction(&f, k));
		s = primary_stream();
		return report(launch(f, primary, s, buf), buf, primary);
	}
	ROW("green_graph_primary_launch") {
		f = load_here();
		CUgraphExec e = captured(f, green_stream(0), primary);
		s = primary_stream();
		return report(cuGraphLaunch(e, s), buf, primary);
	}
	ROW("primary_graph_green_launch") {
		f = load_here();
		CUgraphExec e = captured(f, primary_stream(), primary);
		return report(cuGraphLaunch(e, green_stream(1)), buf, primary);
	}
	ROW("created_module_primary_stream") {
		CUcontext c = created(0);
		TRY(cuCtxSetCurrent(c));
		f = load_here();
		s = primary_stream();
		return report(launch(f, primary, s, buf), buf, primary);
	}
	ROW("created_current_primary_module") {
		f = load_here();
		CUcontext c = created(0);
		return report(launch(f, c, NULL, buf), buf, primary);
	}
	ROW("created_memory_primary_module") {
		f = load_here();
		CUcontext c = created(0);
		TRY(cuCtxSetCurrent(c));
		CUdeviceptr p = zeroed();
		s = primary_stream();
		return report(launch(f, primary, s, p), p, c);
	}
	ROW("affinity_module_primary_stream") {
		CUcontext c = created(8);
		TRY(cuCtxSetCurrent(c));
		f = load_here();
		s = primary_stream();
		return report(launch(f, primary, s, buf), buf, primary);
	}
	ROW("affinity_current_primary_module") {
		f = load_here();
		CUcontext c = created(8);
		return report(launch(f, c, NULL, buf), buf, primary);
	}
#undef ROW
	fprintf(stderr, "ctx_table: no row %s\n", r);
	return 2;
}


/* What the redirect and the context map rely on besides launches
 * (docs/contexts.md, "What the fake driver assumes"): one line each,
 * "fact NAME yes|no detail". */
static int facts(void)
{
	CUcontext g0 = green_ctx(0), again, pc = NULL;
	CUgreenCtx pg = NULL;
	TRY(cuCtxFromGreenCtx(&again, green(0)));
	printf("fact green_ctx_handle_stable %s\n", again == g0 ? "yes" : "no");
	CUstream gs = green_stream(0);
	CUresult rc = cuStreamGetCtx_v2(gs, &pc, &pg);
	printf("fact stream_get_ctx_v2_green_stream %s rc=%s ctx_is_primary=%d green_matches=%d\n",
	       rc == CUDA_SUCCESS && pc == primary && pg == green(0) ? "yes" : "no", err_name(rc),
	       pc == primary, pg == green(0));
	CUcontext sc = NULL;
	rc = cuStreamGetCtx(gs, &sc);
	printf("fact stream_get_ctx_green_stream_is_green %s rc=%s\n",
	       rc == CUDA_SUCCESS && sc == g0 ? "yes" : "no", err_name(rc));
	TRY(cuCtxSetCurrent(g0));
	pc = NULL, pg = NULL;
	rc = cuStreamGetCtx_v2(NULL, &pc, &pg);
	printf("fact stream_get_ctx_v2_null_green_current %s rc=%s\n",
	       rc == CUDA_SUCCESS && pc == primary && pg == green(0) ? "yes" : "no", err_name(rc));
	/* An event of the primary context recorded on a green stream, and
	 * one of the green context on a primary stream: the redirect's
	 * ordering records such events. */
	CUevent pe, ge;
	TRY(cuCtxSetCurrent(primary));
	TRY(cuEventCreate(&pe, CU_EVENT_DISABLE_TIMING));
	rc = cuEventRecord(pe, gs);
	CUresult w = cuStreamWaitEvent(gs, pe, 0);
	printf("fact primary_event_on_green_stream %s record=%s wait=%s\n",
	       rc == CUDA_SUCCESS && w == CUDA_SUCCESS ? "yes" : "no", err_name(rc), err_name(w));
	TRY(cuCtxSetCurrent(g0));
	TRY(cuEventCreate(&ge, CU_EVENT_DISABLE_TIMING));
	CUstream ps = primary_stream();
	rc = cuEventRecord(ge, ps);
	w = cuStreamWaitEvent(ps, ge, 0);
	printf("fact green_event_on_primary_stream %s record=%s wait=%s\n",
	       rc == CUDA_SUCCESS && w == CUDA_SUCCESS ? "yes" : "no", err_name(rc), err_name(w));
	TRY(cuCtxSynchronize());
	return 0;
}

static const char *const rows[] = {
	"green_current_primary_module", "green_module_primary_stream",
	"green_stream_primary_module", "green_module_other_green_stream",
	"green_kernel_library", "green_kernel_get_function",
	"green_graph_primary_launch", "primary_graph_green_launch",
	"created_module_primary_stream", "created_current_primary_module",
	"created_memory_primary_module", "affinity_module_primary_stream",
	"affinity_current_primary_module",
};

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: ctx_table PTX ROW|list\n");
		return 2;
	}
	if (!strcmp(argv[2], "list")) {
		for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
			puts(rows[i]);
		return 0;
	}
	ptx = slurp(argv[1]);
	TRY(cuInit(0));
	TRY(cuDeviceGet(&dev, 0));
	TRY(cuDevicePrimaryCtxRetain(&primary, dev));
	TRY(cuCtxSetCurrent(primary));
	buf = zeroed();
	return !strcmp(argv[2], "facts") ? facts() : run_row(argv[2]);
}
