/* What a redirect will do, decided before any driver call that enqueues:
 * the bundled kernel or the re-homed one, the device all operands are on,
 * and the context there (the device's primary context). */
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "plan.h"
#include "redirect.h"
#include "../report/report.h"

enum { MAX_DEVICES = 64 };

static _Atomic(CUcontext) primary[MAX_DEVICES];

/* The context a redirect to device dev runs in: its primary context, which
 * is where PyTorch (and the runtime API) put the device's memory and work. */
CUcontext cg_device_ctx(int dev)
{
	if (dev < 0 || dev >= MAX_DEVICES)
		return NULL;
	CUcontext c = atomic_load_explicit(&primary[dev], memory_order_acquire);
	CUdevice d;
	if (c || cg_call.cuDeviceGet(&d, dev) != CUDA_SUCCESS ||
	    cg_call.cuDevicePrimaryCtxRetain(&c, d) != CUDA_SUCCESS)
		return c;
	/* A racing retain leaves one more reference on the same context. */
	atomic_store_explicit(&primary[dev], c, memory_order_release);
	return c;
}

void cg_redirect_on_fork(void)
{
	for (int i = 0; i < MAX_DEVICES; i++)
		atomic_store(&primary[i], NULL);
}

/* The one device all of a launch's operands are on (-1: none is device
 * memory); 0 with why filled when they are on several. */
static int operands_device(const char *const *name, const uintptr_t *addr, unsigned n,
			   CUstream s, int *dev, char *why, size_t len)
{
	int first = -1;
	*dev = -1;
	for (unsigned i = 0; i < n; i++) {
		int d = cg_mem_device(addr[i], s);
		if (d < 0)
			continue;
		if (*dev >= 0 && d != *dev) {
			snprintf(why, len, "operands on more than one device (%s on device %d, "
				 "%s on device %d)", name[first], *dev, name[i], d);
			return 0;
		}
		*dev = d;
		first = (int)i;
	}
	return 1;
}

int cg_redirect_decode(const struct cg_launch *l, const struct cg_fn *fn, struct cg_decoded *g,
		       char *why, size_t n)
{
	if (!l->params) {
		snprintf(why, n, "undecodable ABI: parameters passed in the extra buffer");
		return 0;
	}
	return cg_decode_gemm(fn->demangled, l->params, cg_tmap_find, g, why, n) > 0 &&
	       cg_decode_check_launch(g, &l->config, why, n) > 0;
}

static int plan_bundled(const struct cg_launch *l, const struct cg_fn *fn, struct cg_plan *p,
			char *why, size_t n)
{
	if (!cg_redirect_decode(l, fn, &p->gemm, why, n))
		return 0;
	p->via = cg_bundled_name(p->gemm.layout);
	const char *name[CG_DECODE_OPERANDS];
	uintptr_t addr[CG_DECODE_OPERANDS];
	for (unsigned i = 0; i < p->gemm.noperands; i++) {
		name[i] = p->gemm.operand[i].name;
		addr[i] = p->gemm.operand[i].addr;
	}
	return operands_device(name, addr, p->gemm.noperands, l->config.hStream, &p->to_dev, why,
			       n);
}

static int plan_rehome(const struct cg_launch *l, const struct cg_fn *fn, struct cg_plan *p,
		       char *why, size_t n)
{
	const struct cg_layout *lay = cg_layout_of(fn, l->config.hStream);
	size_t nbuf = 0;
	const unsigned char *buf = l->params ? NULL : cg_extra_buffer(l->extra, &nbuf);
	enum { MAX = 64 };
	char label[MAX][16];
	const char *name[MAX];
	uintptr_t addr[MAX];
	unsigned k = 0;
	for (unsigned i = 0; lay && i < lay->n && k < MAX && (l->params || buf); i++) {
		const void *bytes;
		if (!cg_operand_address(lay, i, l->params, buf, nbuf, &bytes, &addr[k]))
			continue;
		snprintf(label[k], sizeof label[k], "parameter %u", lay->p[i].index);
		name[k] = label[k];
		k++;
	}
	p->rehome = 1;
	p->via = "re-homed";
	return operands_device(name, addr, k, l->config.hStream, &p->to_dev, why, n);
}

int cg_redirect_plan(const struct cg_launch *l, const struct cg_crossing *c, const struct cg_fn *fn,
		struct cg_plan *p, char *why, size_t n)
{
	memset(p, 0, sizeof *p);
	if (cg_capturing(l->config.hStream)) {
		snprintf(why, n, "the stream is capturing a CUDA graph, and a redirect would "
			 "add work on other streams to it");
		return 0;
	}
	int ok = cg_decode_is_gemm(fn->demangled) && cg_policy->redirect == CG_REDIRECT_BUNDLED
			 ? plan_bundled(l, fn, p, why, n)
			 : plan_rehome(l, fn, p, why, n);
	if (!ok)
		return 0;
	p->launch_dev = c->launch_dev;
	if (p->to_dev < 0)
		p->to_dev = c->launch_dev;
	/* A function of another context of the launch device (cuCtxCreate)
	 * runs where it is loaded: loading it into the launch context would
	 * wait for that context's queued work, which may be waiting for the
	 * program's next call (docs/redirect.md, Deadlock). */
	if (p->rehome && p->to_dev == c->launch_dev && fn->owner && c->owner_dev == p->to_dev) {
		p->own_ctx = 1;
		p->target = fn->owner;
		return 1;
	}
	/* On the launch device, into its module domain: a green launch
	 * context's work goes to its primary context, ordered with the streams
	 * of both (shim/redirect/streams.c lists them together). */
	p->target = p->to_dev == c->launch_dev
			    ? cg_ctx_domain((CUcontext)c->launch_ctx, l->config.hStream)
			    : cg_device_ctx(p->to_dev);
	if (!p->target) {
		snprintf(why, n, "no context for device %d", p->to_dev);
		return 0;
	}
	return 1;
}
