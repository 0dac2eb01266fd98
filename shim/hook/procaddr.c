/* cuGetProcAddress: libcudart (and so PyTorch) resolves every driver entry
 * point through it, starting with cuGetProcAddress itself.  The real lookup
 * runs first, so the driver alone decides the variant (cudaVersion, the
 * per-thread-stream flag); the pointer it returns is then swapped for our
 * wrapper of that same variant, found by identity.  The self-lookup returns
 * the real cuGetProcAddress[_v2], which maps to these very hooks. */
#include <string.h>

#include "hook.h"
#include "../check/check.h"
#include "../redirect/shadow.h"
#include "../report/report.h"

/* The families marked COVERAGE in hooks.def. */
static const char *const coverage[] = {
#define FAMILY(fam)
#define COVERAGE(fam) #fam,
#define VARIANT(fam, sym)
#include "../hooks.def"
#undef FAMILY
#undef COVERAGE
#undef VARIANT
};

static int loses_coverage(const char *family)
{
	for (size_t i = 0; i < sizeof coverage / sizeof coverage[0]; i++)
		if (strcmp(family, coverage[i]) == 0)
			return 1;
	return 0;
}

/* A hooked family whose pointer is no libcuda export we know would escape
 * checking: say so once per family instead of ignoring it.  Where that
 * loses launch checks, also fail `ctxguard --audit`, as calls passed
 * unchecked at start-up do.  Others do not: a variant a newer driver adds
 * to a family ctxguard hooks for its bookkeeping would otherwise fail every
 * job that looks it up until ctxguard lists it.  A lookup of a name
 * ctxguard does not hook is left as the driver answered it: no wrapper was
 * lost, and nothing is said. */
static void unmapped(const char *symbol, int version, cuuint64_t flags, void *p)
{
	static _Atomic unsigned char said[CG_NVARIANTS];
	for (int i = 0; i < CG_NVARIANTS; i++) {
		if (strcmp(cg_variants[i].family, symbol) != 0 &&
		    strcmp(cg_variants[i].symbol, symbol) != 0)
			continue;
		if (atomic_exchange(&said[i], 1))
			return;
		cg_stderr("ctxguard: cuGetProcAddress(\"%s\", %d, %#llx) returned %p, "
			  "which is not a libcuda export ctxguard knows: calls through it "
			  "are not checked\n", symbol, version, (unsigned long long)flags, p);
		/* Another thread starting the shim is still opening the log
		 * and the command's status file.  "version" is every record's
		 * own: ctxguard's. */
		if (cg_starting_elsewhere())
			return;
		if (loses_coverage(cg_variants[i].family))
			cg_status_word("unmapped");
		cg_log_event("unmapped", "\"symbol\":\"%s\",\"cuda_version\":%d,\"flags\":%llu",
			     symbol, version, (unsigned long long)flags);
		return;
	}
}

/* One of our own wrappers: another interposer looked the entry point up
 * through us (our dlsym or cuGetProcAddress) and hands it on; calls
 * through it are checked, so nothing is lost and nothing is said. */
static int ours(const void *p)
{
	for (int i = 0; i < CG_NVARIANTS; i++)
		if (cg_variants[i].hook == p)
			return 1;
	return 0;
}

static CUresult finish(CUresult rc, const char *symbol, void **pfn, int version,
		       cuuint64_t flags)
{
	if (rc != CUDA_SUCCESS || !pfn || !*pfn || !symbol)
		return rc;
	void *h = cg_hook_for_real(*pfn);
	if (h) {
		*pfn = h;
		cg_count(CG_C_HOOKED_PROCADDR);
	} else if (!ours(*pfn)) {
		unmapped(symbol, version, flags, *pfn);
	}
	return rc;
}

CUresult cg_on_cuGetProcAddress(const struct cg_variant *v, const char *symbol,
				void **pfn, int cudaVersion, cuuint64_t flags)
{
	CUresult rc = CG_REAL(cuGetProcAddress, v)(symbol, pfn, cudaVersion, flags);
	return finish(rc, symbol, pfn, cudaVersion, flags);
}

CUresult cg_on_cuGetProcAddress_v2(const struct cg_variant *v, const char *symbol,
				   void **pfn, int cudaVersion, cuuint64_t flags,
				   CUdriverProcAddressQueryResult *status)
{
	CUresult rc = CG_REAL(cuGetProcAddress_v2, v)(symbol, pfn, cudaVersion, flags, status);
	return finish(rc, symbol, pfn, cudaVersion, flags);
}
