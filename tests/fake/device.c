/* cuInit and the device queries: FAKE_CUDA_DEVICES H200-like devices. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fake.h"

int fake_ndev;
struct fake_device fake_dev[FAKE_MAX_DEVICES];

/* What an H200 reports; attributes not listed read as 0. */
static const int device_attr[CU_DEVICE_ATTRIBUTE_MAX] = {
	[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = 1024,
	[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X] = 1024,
	[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y] = 1024,
	[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z] = 64,
	[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X] = 2147483647,
	[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y] = 65535,
	[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z] = 65535,
	[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK] = 49152,
	[CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY] = 65536,
	[CU_DEVICE_ATTRIBUTE_WARP_SIZE] = 32,
	[CU_DEVICE_ATTRIBUTE_MAX_PITCH] = 2147483647,
	[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK] = 65536,
	[CU_DEVICE_ATTRIBUTE_CLOCK_RATE] = 1980000,
	[CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT] = 512,
	[CU_DEVICE_ATTRIBUTE_GPU_OVERLAP] = 1,
	[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT] = 132,
	[CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY] = 1,
	[CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS] = 1,
	[CU_DEVICE_ATTRIBUTE_ECC_ENABLED] = 1,
	[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] = 0x18, /* + ordinal */
	[CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE] = 3201000,
	[CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH] = 6144,
	[CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE] = 62914560,
	[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR] = 2048,
	[CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT] = 5,
	[CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING] = 1,
	[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] = 9,
	[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR] = 0,
	[CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR] = 233472,
	[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR] = 65536,
	[CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY] = 1,
	[CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS] = 1,
	[CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH] = 1,
	[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN] = FAKE_MAX_SHARED_OPTIN,
	[CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR] = 32,
	[CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE] = 82837504,
	[CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE] = 134213632,
	[CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK] = 1024,
	[CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH] = 1,
	[CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED] = 1,
	[CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS] = 1,
};

bool fake_dev_valid(CUdevice dev)
{
	return dev >= 0 && dev < fake_ndev;
}

/* FAKE_CUDA_DEVICES: unset means FAKE_DEFAULT_DEVICES; 0..FAKE_MAX_DEVICES otherwise. */
static CUresult device_count_from_env(int *n)
{
	const char *s = getenv("FAKE_CUDA_DEVICES");
	if (!s) {
		*n = FAKE_DEFAULT_DEVICES;
		return CUDA_SUCCESS;
	}
	char *end;
	long v = strtol(s, &end, 10);
	if (end == s || *end != '\0' || v < 0 || v > FAKE_MAX_DEVICES)
		return CUDA_ERROR_INVALID_VALUE;
	*n = (int)v;
	return v == 0 ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

static CUresult init_devices(void)
{
	int n;
	CUresult rc = device_count_from_env(&n);
	if (rc != CUDA_SUCCESS)
		return rc;
	fake_ndev = n;
	for (int d = 0; d < n; d++) {
		rc = fake_ctx_create_primary(d, &fake_dev[d].primary);
		if (rc != CUDA_SUCCESS)
			return rc;
		CUmemoryPool pool = fake_pool_take(&fake_mempool_pool);
		if (!pool)
			return CUDA_ERROR_OUT_OF_MEMORY;
		pool->dev = d;
		pool->is_default = true;
		fake_dev[d].default_pool = pool;
	}
	fake_set_initialized();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuInit(unsigned int Flags)
{
	FAKE_ENTER_NOINIT();
	if (Flags != 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	return fake_leave(fake_initialized() ? CUDA_SUCCESS : init_devices());
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
	FAKE_ENTER_NOINIT();
	if (!driverVersion)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	*driverVersion = FAKE_DRIVER_VERSION;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	FAKE_ENTER();
	if (!count)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	*count = fake_ndev;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
	FAKE_ENTER();
	if (!device)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_dev_valid(ordinal))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	*device = ordinal;
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	FAKE_ENTER();
	if (!name || len <= 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_dev_valid(dev))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	snprintf(name, (size_t)len, "NVIDIA H200");
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	FAKE_ENTER();
	if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_dev_valid(dev))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	*pi = device_attr[attrib] + (attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID ? dev : 0);
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	FAKE_ENTER();
	if (!bytes)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_dev_valid(dev))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	*bytes = (size_t)143771 << 20; /* H200: 143771 MiB */
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	FAKE_ENTER();
	if (!canAccessPeer)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_dev_valid(dev) || !fake_dev_valid(peerDev))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	*canAccessPeer = dev != peerDev;
	return fake_leave(CUDA_SUCCESS);
}

/* "0000:BB:00.0" with the bus of CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, as the
 * driver formats it; a short buffer gets a NUL-terminated prefix. */
CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	/* outside the lock: a fork meanwhile must not wait for the answer */
	const char *delay = getenv("FAKE_CUDA_PCI_DELAY_MS");
	if (delay)
		usleep((useconds_t)atoi(delay) * 1000u);
	FAKE_ENTER();
	if (!pciBusId || len <= 0)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_dev_valid(dev))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	snprintf(pciBusId, (size_t)len, "0000:%02X:00.0",
		 device_attr[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] + dev);
	return fake_leave(CUDA_SUCCESS);
}

/* 16 bytes that differ per device and never change. */
static CUresult device_uuid(const char *api, CUuuid *uuid, CUdevice dev)
{
	CUresult rc = fake_enter(api, true);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (!uuid)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake_dev_valid(dev))
		return fake_leave(CUDA_ERROR_INVALID_DEVICE);
	for (int i = 0; i < 16; i++)
		uuid->bytes[i] = (char)(0x5a + 17 * i + dev);
	return fake_leave(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	return device_uuid(__func__, uuid, dev);
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	return device_uuid(__func__, uuid, dev);
}
