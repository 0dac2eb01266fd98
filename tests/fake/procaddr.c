/*
 * cuGetProcAddress: one table of every entry point the fake exports, with the CUDA
 * version each variant appeared in (as cudaTypedefs.h names them: PFN_cuMemAlloc_v3020 is
 * cuMemAlloc_v2). A lookup returns the very address of the exported symbol, as the real
 * driver does; the build links with -Bsymbolic so the address is this library's own even
 * when a preloaded library defines the same name.
 */
#include <stdlib.h>
#include <string.h>

#include "fake.h"

struct proc {
	const char *base; /* name asked for */
	void *fn;	  /* the exported variant */
	int version;	  /* first CUDA version that variant serves */
	bool per_thread;  /* _ptsz / _ptds variant */
};

#define P(base, sym, version)                                                                      \
	{                                                                                          \
#base, (void *)sym, version, false                                                 \
	}
#define PT(base, sym, version)                                                                     \
	{                                                                                          \
#base, (void *)sym, version, true                                                  \
	}

static const struct proc procs[] = {
	P(cuInit, cuInit, 2000),
	P(cuDriverGetVersion, cuDriverGetVersion, 2020),
	P(cuDeviceGet, cuDeviceGet, 2000),
	P(cuDeviceGetCount, cuDeviceGetCount, 2000),
	P(cuDeviceGetName, cuDeviceGetName, 2000),
	P(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000),
	P(cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020),
	P(cuDeviceCanAccessPeer, cuDeviceCanAccessPeer, 4000),
	P(cuDeviceGetPCIBusId, cuDeviceGetPCIBusId, 4010),
	P(cuDeviceGetUuid, cuDeviceGetUuid, 9020),
	P(cuDeviceGetUuid, cuDeviceGetUuid_v2, 11040),
	P(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000),
	P(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000),
	P(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 11000),
	P(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000),
	P(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, 11000),
	P(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 7000),
	P(cuCtxCreate, cuCtxCreate_v2, 3020),
	P(cuCtxCreate, cuCtxCreate_v3, 11040),
	P(cuCtxCreate, cuCtxCreate_v4, 12050),
	P(cuCtxDestroy, cuCtxDestroy_v2, 4000),
	P(cuDeviceGetDevResource, cuDeviceGetDevResource, 12040),
	P(cuDevSmResourceSplitByCount, cuDevSmResourceSplitByCount, 12040),
	P(cuDevResourceGenerateDesc, cuDevResourceGenerateDesc, 12040),
	P(cuGreenCtxCreate, cuGreenCtxCreate, 12040),
	P(cuCtxFromGreenCtx, cuCtxFromGreenCtx, 12040),
	P(cuGreenCtxDestroy, cuGreenCtxDestroy, 12040),
	P(cuGreenCtxStreamCreate, cuGreenCtxStreamCreate, 12050),
	P(cuCtxSetCurrent, cuCtxSetCurrent, 4000),
	P(cuCtxGetCurrent, cuCtxGetCurrent, 4000),
	P(cuCtxPushCurrent, cuCtxPushCurrent_v2, 4000),
	P(cuCtxPopCurrent, cuCtxPopCurrent_v2, 4000),
	P(cuCtxGetDevice, cuCtxGetDevice, 2000),
	P(cuCtxGetDevice, cuCtxGetDevice_v2, 13000),
	P(cuCtxSynchronize, cuCtxSynchronize, 2000),
	P(cuCtxSynchronize, cuCtxSynchronize_v2, 13000),
	P(cuCtxEnablePeerAccess, cuCtxEnablePeerAccess, 4000),
	P(cuCtxDisablePeerAccess, cuCtxDisablePeerAccess, 4000),
	P(cuCtxGetApiVersion, cuCtxGetApiVersion, 3020),
	P(cuCtxGetFlags, cuCtxGetFlags, 7000),
	P(cuCtxGetId, cuCtxGetId, 12000),
	P(cuStreamCreate, cuStreamCreate, 2000),
	P(cuStreamCreateWithPriority, cuStreamCreateWithPriority, 5050),
	P(cuStreamDestroy, cuStreamDestroy_v2, 4000),
	P(cuStreamGetCtx, cuStreamGetCtx, 9020),
	PT(cuStreamGetCtx, cuStreamGetCtx_ptsz, 9020),
	P(cuStreamGetCtx, cuStreamGetCtx_v2, 12050),
	PT(cuStreamGetCtx, cuStreamGetCtx_v2_ptsz, 12050),
	P(cuStreamGetDevice, cuStreamGetDevice, 12080),
	PT(cuStreamGetDevice, cuStreamGetDevice_ptsz, 12080),
	P(cuStreamSynchronize, cuStreamSynchronize, 2000),
	PT(cuStreamSynchronize, cuStreamSynchronize_ptsz, 7000),
	P(cuStreamQuery, cuStreamQuery, 2000),
	PT(cuStreamQuery, cuStreamQuery_ptsz, 7000),
	P(cuStreamIsCapturing, cuStreamIsCapturing, 10000),
	PT(cuStreamIsCapturing, cuStreamIsCapturing_ptsz, 10000),
	P(cuStreamWaitEvent, cuStreamWaitEvent, 3020),
	PT(cuStreamWaitEvent, cuStreamWaitEvent_ptsz, 7000),
	P(cuEventCreate, cuEventCreate, 2000),
	P(cuEventDestroy, cuEventDestroy_v2, 4000),
	P(cuEventRecord, cuEventRecord, 2000),
	PT(cuEventRecord, cuEventRecord_ptsz, 7000),
	P(cuEventQuery, cuEventQuery, 2000),
	P(cuEventSynchronize, cuEventSynchronize, 2000),
	P(cuModuleLoad, cuModuleLoad, 2000),
	P(cuModuleLoadData, cuModuleLoadData, 2000),
	P(cuModuleLoadDataEx, cuModuleLoadDataEx, 2010),
	P(cuModuleLoadFatBinary, cuModuleLoadFatBinary, 2000),
	P(cuModuleUnload, cuModuleUnload, 2000),
	P(cuModuleGetFunction, cuModuleGetFunction, 2000),
	P(cuModuleGetFunctionCount, cuModuleGetFunctionCount, 12040),
	P(cuModuleEnumerateFunctions, cuModuleEnumerateFunctions, 12040),
	P(cuFuncGetName, cuFuncGetName, 12030),
	P(cuFuncGetModule, cuFuncGetModule, 11000),
	P(cuFuncGetParamInfo, cuFuncGetParamInfo, 12040),
	P(cuFuncSetAttribute, cuFuncSetAttribute, 9000),
	P(cuFuncGetAttribute, cuFuncGetAttribute, 2020),
	P(cuFuncIsLoaded, cuFuncIsLoaded, 12040),
	P(cuFuncLoad, cuFuncLoad, 12040),
	P(cuLibraryLoadData, cuLibraryLoadData, 12000),
	P(cuLibraryLoadFromFile, cuLibraryLoadFromFile, 12000),
	P(cuLibraryUnload, cuLibraryUnload, 12000),
	P(cuLibraryGetKernel, cuLibraryGetKernel, 12000),
	P(cuLibraryGetKernelCount, cuLibraryGetKernelCount, 12040),
	P(cuLibraryEnumerateKernels, cuLibraryEnumerateKernels, 12040),
	P(cuLibraryGetModule, cuLibraryGetModule, 12000),
	P(cuKernelGetFunction, cuKernelGetFunction, 12000),
	P(cuKernelGetName, cuKernelGetName, 12030),
	P(cuKernelGetLibrary, cuKernelGetLibrary, 12050),
	P(cuKernelGetParamInfo, cuKernelGetParamInfo, 12040),
	P(cuKernelSetAttribute, cuKernelSetAttribute, 12000),
	P(cuKernelGetAttribute, cuKernelGetAttribute, 12000),
	P(cuMemAlloc, cuMemAlloc_v2, 3020),
	P(cuMemAllocPitch, cuMemAllocPitch_v2, 3020),
	P(cuMemFree, cuMemFree_v2, 3020),
	P(cuMemGetAddressRange, cuMemGetAddressRange_v2, 3020),
	P(cuMemAllocManaged, cuMemAllocManaged, 6000),
	P(cuMemAllocHost, cuMemAllocHost_v2, 3020),
	P(cuMemHostAlloc, cuMemHostAlloc, 2020),
	P(cuMemFreeHost, cuMemFreeHost, 2000),
	P(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2, 3020),
	P(cuMemHostRegister, cuMemHostRegister_v2, 6050),
	P(cuMemHostUnregister, cuMemHostUnregister, 4000),
	P(cuPointerGetAttribute, cuPointerGetAttribute, 4000),
	P(cuPointerGetAttributes, cuPointerGetAttributes, 7000),
	P(cuMemcpyHtoD, cuMemcpyHtoD_v2, 3020),
	P(cuMemcpyDtoH, cuMemcpyDtoH_v2, 3020),
	P(cuMemcpyDtoD, cuMemcpyDtoD_v2, 3020),
	P(cuMemsetD8, cuMemsetD8_v2, 3020),
	P(cuMemsetD8Async, cuMemsetD8Async, 3020),
	P(cuMemAllocAsync, cuMemAllocAsync, 11020),
	PT(cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020),
	P(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020),
	PT(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020),
	P(cuMemFreeAsync, cuMemFreeAsync, 11020),
	PT(cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020),
	P(cuMemPoolCreate, cuMemPoolCreate, 11020),
	P(cuMemPoolExportPointer, cuMemPoolExportPointer, 11020),
	P(cuMemPoolImportPointer, cuMemPoolImportPointer, 11020),
	P(cuIpcGetMemHandle, cuIpcGetMemHandle, 4010),
	P(cuIpcOpenMemHandle, cuIpcOpenMemHandle, 4010),
	P(cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2, 11000),
	P(cuIpcCloseMemHandle, cuIpcCloseMemHandle, 4010),
	P(cuImportExternalMemory, cuImportExternalMemory, 10000),
	P(cuExternalMemoryGetMappedBuffer, cuExternalMemoryGetMappedBuffer, 10000),
	P(cuDestroyExternalMemory, cuDestroyExternalMemory, 10000),
	P(cuMemPoolDestroy, cuMemPoolDestroy, 11020),
	P(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020),
	P(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020),
	P(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 10020),
	P(cuMemAddressReserve, cuMemAddressReserve, 10020),
	P(cuMemAddressFree, cuMemAddressFree, 10020),
	P(cuMemCreate, cuMemCreate, 10020),
	P(cuMemRelease, cuMemRelease, 10020),
	P(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000),
	P(cuMemExportToShareableHandle, cuMemExportToShareableHandle, 10020),
	P(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle, 10020),
	P(cuMemGetAllocationPropertiesFromHandle, cuMemGetAllocationPropertiesFromHandle, 10020),
	P(cuMemMap, cuMemMap, 10020),
	P(cuMemUnmap, cuMemUnmap, 10020),
	P(cuMemSetAccess, cuMemSetAccess, 10020),
	P(cuTensorMapEncodeTiled, cuTensorMapEncodeTiled, 12000),
	P(cuTensorMapEncodeIm2col, cuTensorMapEncodeIm2col, 12000),
	P(cuTensorMapEncodeIm2colWide, cuTensorMapEncodeIm2colWide, 12080),
	P(cuTensorMapReplaceAddress, cuTensorMapReplaceAddress, 12000),
	P(cuLaunchKernel, cuLaunchKernel, 4000),
	PT(cuLaunchKernel, cuLaunchKernel_ptsz, 7000),
	P(cuLaunchKernelEx, cuLaunchKernelEx, 11060),
	P(cuOccupancyMaxActiveClusters, cuOccupancyMaxActiveClusters, 11070),
	PT(cuLaunchKernelEx, cuLaunchKernelEx_ptsz, 11060),
	P(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000),
	PT(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz, 9000),
	P(cuLaunchCooperativeKernelMultiDevice, cuLaunchCooperativeKernelMultiDevice, 9000),
	P(cuFuncSetBlockShape, cuFuncSetBlockShape, 2000),
	P(cuFuncSetSharedSize, cuFuncSetSharedSize, 2000),
	P(cuParamSetSize, cuParamSetSize, 2000),
	P(cuParamSeti, cuParamSeti, 2000),
	P(cuParamSetf, cuParamSetf, 2000),
	P(cuParamSetv, cuParamSetv, 2000),
	P(cuLaunch, cuLaunch, 2000),
	P(cuLaunchGrid, cuLaunchGrid, 2000),
	P(cuLaunchGridAsync, cuLaunchGridAsync, 2000),
	P(cuGraphCreate, cuGraphCreate, 10000),
	P(cuGraphDestroy, cuGraphDestroy, 10000),
	P(cuGraphAddKernelNode, cuGraphAddKernelNode, 10000),
	P(cuGraphAddKernelNode, cuGraphAddKernelNode_v2, 12000),
	P(cuGraphKernelNodeGetParams, cuGraphKernelNodeGetParams, 10000),
	P(cuGraphKernelNodeGetParams, cuGraphKernelNodeGetParams_v2, 12000),
	P(cuGraphKernelNodeSetParams, cuGraphKernelNodeSetParams, 10000),
	P(cuGraphKernelNodeSetParams, cuGraphKernelNodeSetParams_v2, 12000),
	P(cuGraphAddEmptyNode, cuGraphAddEmptyNode, 10000),
	P(cuGraphAddMemAllocNode, cuGraphAddMemAllocNode, 11040),
	P(cuGraphAddMemFreeNode, cuGraphAddMemFreeNode, 11040),
	P(cuGraphNodeGetType, cuGraphNodeGetType, 10000),
	P(cuGraphAddNode, cuGraphAddNode, 12020),
	P(cuGraphAddNode, cuGraphAddNode_v2, 12030),
	P(cuGraphNodeSetParams, cuGraphNodeSetParams, 12020),
	P(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040),
	P(cuGraphExecKernelNodeSetParams, cuGraphExecKernelNodeSetParams, 10010),
	P(cuGraphExecKernelNodeSetParams, cuGraphExecKernelNodeSetParams_v2, 12000),
	P(cuGraphExecNodeSetParams, cuGraphExecNodeSetParams, 12020),
	P(cuGraphLaunch, cuGraphLaunch, 10000),
	PT(cuGraphLaunch, cuGraphLaunch_ptsz, 10000),
	P(cuGraphExecDestroy, cuGraphExecDestroy, 10000),
	P(cuGetProcAddress, cuGetProcAddress, 11030),
	P(cuGetProcAddress, cuGetProcAddress_v2, 12000),
	P(cuGetExportTable, cuGetExportTable, 3000),
	P(cuGetErrorString, cuGetErrorString, 6000),
	P(cuGetErrorName, cuGetErrorName, 6000),
};

#undef P
#undef PT

/* Newest variant of `symbol` serving `version` among the (per_thread) variants. */
static const struct proc *newest(const char *symbol, int version, bool per_thread, bool *known)
{
	const struct proc *best = NULL;
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		const struct proc *p = &procs[i];
		if (strcmp(p->base, symbol) != 0)
			continue;
		*known = true;
		if (p->per_thread == per_thread && p->version <= version &&
		    (!best || p->version > best->version))
			best = p;
	}
	return best;
}

/* FAKE_CUDA_UNEXPORTED=NAME: cuGetProcAddress answers NAME with a function of the fake's own
 * that it does not export (a driver may hand out internal functions), which no shim can map to
 * its wrapper; it does what the export does.  One twin per name a test asks for: an entry
 * point ctxguard hooks for what it says (cuGetErrorString), one it hooks to track loads
 * (cuModuleLoadData) and one it does not hook (cuGetErrorName).  Read at each lookup. */
static CUresult unexported_cuGetErrorString(CUresult error, const char **str)
{
	return cuGetErrorString(error, str);
}

static CUresult unexported_cuGetErrorName(CUresult error, const char **str)
{
	return cuGetErrorName(error, str);
}

static CUresult unexported_cuModuleLoadData(CUmodule *module, const void *image)
{
	return cuModuleLoadData(module, image);
}

static void *answer(const struct proc *p)
{
	static const struct {
		void *exported, *twin;
	} twins[] = {
		{(void *)cuGetErrorString, (void *)unexported_cuGetErrorString},
		{(void *)cuGetErrorName, (void *)unexported_cuGetErrorName},
		{(void *)cuModuleLoadData, (void *)unexported_cuModuleLoadData},
	};
	if (!p)
		return NULL;
	const char *name = getenv("FAKE_CUDA_UNEXPORTED");
	for (size_t i = 0; name && i < sizeof twins / sizeof twins[0]; i++)
		if (p->fn == twins[i].exported && strcmp(p->base, name) == 0)
			return twins[i].twin;
	return p->fn;
}

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *status)
{
	const cuuint64_t known_flags =
		CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	if (!symbol || !pfn || (flags & ~known_flags) || cudaVersion > FAKE_DRIVER_VERSION)
		return CUDA_ERROR_INVALID_VALUE;
	bool known = false;
	/* Per-thread lookups fall back to the legacy variant when there is no per-thread one. */
	const struct proc *p = NULL;
	if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
		p = newest(symbol, cudaVersion, true, &known);
	if (!p)
		p = newest(symbol, cudaVersion, false, &known);
	*pfn = answer(p);
	if (status)
		*status = p	  ? CU_GET_PROC_ADDRESS_SUCCESS
			  : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
				  : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return p ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	FAKE_ENTER_NOINIT();
	return fake_leave(lookup(symbol, pfn, cudaVersion, flags, NULL));
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
				     cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	FAKE_ENTER_NOINIT();
	return fake_leave(lookup(symbol, pfn, cudaVersion, flags, symbolStatus));
}

void *fake_entry_point(const char *base, int per_thread)
{
	bool known = false;
	const struct proc *p = newest(base, FAKE_DRIVER_VERSION, per_thread, &known);
	return p ? p->fn : NULL;
}

/* The private tables cudart loads its own fatbins through are not modelled. */
CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	FAKE_ENTER_NOINIT();
	if (!ppExportTable || !pExportTableId)
		return fake_leave(CUDA_ERROR_INVALID_VALUE);
	*ppExportTable = NULL;
	return fake_leave(CUDA_ERROR_NOT_SUPPORTED);
}
