// The one kernel of tests/gpu/ctx_table.c: every element up by one.
extern "C" __global__ void add1(int *p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] += 1;
}
