/* Warming: what a redirect into a context makes there -- the bundled
 * kernels, each loaded eagerly, and ctxguard's own stream -- made ahead,
 * while the policy can redirect.  A module load, or the first launch of a
 * lazily loaded kernel, may wait for the device's queued work; made inside
 * a redirect whose target device waits for the program's later work (the
 * other half of a collective), that wait would never end, in ctxguard's own
 * call.  Ahead means: a context when the program creates a stream there
 * (before the stream can block), and every device's active primary context
 * whenever a module or library is loaded (a kernel is loaded before it can
 * cross).  Each step is idempotent and cheap once done; a failure here is
 * left for the redirect itself to meet and report. */
#include "../../kernels/grouped_mm.h"
#include "redirect.h"
#include "../report/report.h"

/* Everything here calls the real driver (cg_call, and the bundled API's
 * own table), so that nothing it loads comes back through the load hook. */
void cg_warm(CUcontext ctx)
{
	CUstream s;
	CUcontext popped;
	if (!ctx || cg_call.cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)
		return;
	cg_stream_owned(ctx, &s);
	const struct cg_gmm_driver *drv = cg_bundled_driver();
	if (drv)
		cg_gmm_prepare_with(drv, ctx);
	cg_call.cuCtxPopCurrent_v2(&popped);
}

/* Only contexts that exist: retaining an idle device's primary context
 * would create one, and take its memory, on every GPU of the machine. */
void cg_warm_devices(void)
{
	int n;
	if (!cg_policy_redirects(cg_policy) || cg_call.cuDeviceGetCount(&n) != CUDA_SUCCESS)
		return;
	for (int i = 0; i < n; i++) {
		CUdevice d;
		unsigned flags;
		int active;
		if (cg_call.cuDeviceGet(&d, i) == CUDA_SUCCESS &&
		    cg_call.cuDevicePrimaryCtxGetState(d, &flags, &active) == CUDA_SUCCESS && active)
			cg_warm(cg_device_ctx(i));
	}
}
