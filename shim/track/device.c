/* What each device is called outside this process: its PCI bus id and
 * UUID, so records from many hosts and processes name the same GPU the
 * same way (CUDA ordinals depend on CUDA_VISIBLE_DEVICES). */
#include <stdio.h>
#include <string.h>

#include "track.h"
#include "../once.h"
#include "../report/report.h"

enum { MAXDEV = 64 };
static struct name {
	struct cg_once asked;
	char pci[16];              /* "0000:18:00.0" */
	char uuid[48];             /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
} devs[MAXDEV];

/* Asked once per device, by whichever thread first wants a name; the
 * others wait for the answer (two driver queries, on a report's path). */
static void learn(int dev)
{
	if (!cg_once_enter(&devs[dev].asked))
		return;
	if (!cg_call.cuDeviceGetPCIBusId ||
	    cg_call.cuDeviceGetPCIBusId(devs[dev].pci, sizeof devs[dev].pci, dev) != CUDA_SUCCESS)
		devs[dev].pci[0] = 0;
	CUuuid u;
	if (cg_call.cuDeviceGetUuid_v2 && cg_call.cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS) {
		const unsigned char *b = (const unsigned char *)u.bytes;
		snprintf(devs[dev].uuid, sizeof devs[dev].uuid,
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
			 b[12], b[13], b[14], b[15]);
	}
	cg_once_leave(&devs[dev].asked);
}

static const char *known(int dev, size_t field)
{
	if (dev < 0 || dev >= MAXDEV)
		return NULL;
	learn(dev);
	const char *s = (const char *)&devs[dev] + field;
	return *s ? s : NULL;
}

/* In a forked child: a name its parent was asking for is asked again (the
 * asker did not come along); names already known stay, as the devices do. */
void cg_device_on_fork(void)
{
	for (int i = 0; i < MAXDEV; i++) {
		if (cg_once_on_fork(&devs[i].asked)) {
			memset(devs[i].pci, 0, sizeof devs[i].pci);
			memset(devs[i].uuid, 0, sizeof devs[i].uuid);
		}
	}
}

const char *cg_device_pci(int dev)
{
	return known(dev, offsetof(struct name, pci));
}

const char *cg_device_uuid(int dev)
{
	return known(dev, offsetof(struct name, uuid));
}
