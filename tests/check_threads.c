/* The shim inside one process: many threads launching on two devices at
 * once, and a fork.  Runs in the Check binary itself, under the shim. */
#include <check.h>
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../policy/policy.h"
#include "suite.h"
#include "spawn.h"

#define EXPERT "_ZN9deep_gemm19sm90_bf16_gemm_implILj0EEEvPijjj14CUtensorMap_stS2_S2_"
static const char image[] = "//ctxguard-fake-image\n.kernel " EXPERT " 8,4,4,4,128,128,128\n";

enum { THREADS = 16, ROUNDS = 2000, CROSS_EVERY = 10 };

static CUcontext ctx[2];
static CUfunction fn[2];

static void setup(const char *mode)
{
	setenv("CTXGUARD_MODE", mode, 1);
	unsetenv("CTXGUARD_SCOPE");
	ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
	for (int d = 0; d < 2; d++) {
		CUdevice dev;
		CUmodule mod;
		ck_assert_int_eq(cuDeviceGet(&dev, d), CUDA_SUCCESS);
		ck_assert_int_eq(cuDevicePrimaryCtxRetain(&ctx[d], dev), CUDA_SUCCESS);
		ck_assert_int_eq(cuCtxSetCurrent(ctx[d]), CUDA_SUCCESS);
		ck_assert_int_eq(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
		ck_assert_int_eq(cuModuleGetFunction(&fn[d], mod, EXPERT), CUDA_SUCCESS);
	}
}

static CUresult launch_on(CUfunction f, CUstream s)
{
	CUtensorMap arg[7];
	memset(arg, 0, sizeof arg);
	void *params[7] = {&arg[0], &arg[1], &arg[2], &arg[3], &arg[4], &arg[5], &arg[6]};
	return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
}

static CUresult launch(CUfunction f)
{
	return launch_on(f, NULL);
}

struct result {
	int ok, refused, wrong;
};

/* Even threads stay on their device; odd ones also cross every tenth
 * launch and must see exactly those refused, with the message. */
static void *worker(void *arg)
{
	long i = (long)arg;
	int d = (int)(i % 2);
	struct result *res = calloc(1, sizeof *res);
	cuCtxSetCurrent(ctx[d]);
	for (int k = 0; k < ROUNDS; k++) {
		int cross = (i & 2) && k % CROSS_EVERY == 0;
		CUresult rc = launch(fn[cross ? 1 - d : d]);
		if (rc == CUDA_SUCCESS && !cross) {
			res->ok++;
		} else if (rc == CUDA_ERROR_INVALID_HANDLE && cross) {
			const char *s = NULL;
			cuGetErrorString(rc, &s);
			if (s && strncmp(s, cg_deepgemm_message, strlen(cg_deepgemm_message)) == 0)
				res->refused++;
			else
				res->wrong++;
		} else {
			res->wrong++;
		}
	}
	return res;
}

/* THREADS threads of body (argument: the thread's number), their results
 * summed. */
static struct result run_threads(void *(*body)(void *))
{
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, body, (void *)i), 0);
	struct result sum = {0, 0, 0};
	for (long i = 0; i < THREADS; i++) {
		struct result *res;
		pthread_join(t[i], (void **)&res);
		sum.ok += res->ok;
		sum.refused += res->refused;
		sum.wrong += res->wrong;
		free(res);
	}
	return sum;
}

START_TEST(sixteen_threads_two_devices)
{
	setup("error");
	struct result r = run_threads(worker);
	int crossing_threads = 0;
	for (long i = 0; i < THREADS; i++)
		crossing_threads += (i & 2) != 0;
	int crossings = crossing_threads * (ROUNDS / CROSS_EVERY);
	ck_assert_int_eq(r.wrong, 0);
	ck_assert_int_eq(r.refused, crossings);
	ck_assert_int_eq(r.ok, THREADS * ROUNDS - crossings);
}
END_TEST

/* Threads make a stream on one device and then the other, launch on it
 * and destroy it, over and over: the driver hands the handles out again,
 * to either device, and each launch is checked against the context its
 * stream has now, never the one a thread remembered for an earlier one. */
static void *churner(void *arg)
{
	long i = (long)arg;
	struct result *res = calloc(1, sizeof *res);
	for (int k = 0; k < ROUNDS / 10; k++) {
		int d = (int)((i + k) % 2);
		cuCtxSetCurrent(ctx[d]);
		CUstream s;
		if (cuStreamCreate(&s, 0) != CUDA_SUCCESS) {
			res->wrong++;
			continue;
		}
		for (int j = 0; j < 4; j++) {
			int cross = j == 3;
			CUresult rc = launch_on(fn[cross ? 1 - d : d], s);
			if (rc == CUDA_SUCCESS && !cross)
				res->ok++;
			else if (rc == CUDA_ERROR_INVALID_HANDLE && cross)
				res->refused++;
			else
				res->wrong++;
		}
		cuStreamDestroy(s);
	}
	return res;
}

START_TEST(streams_made_and_destroyed_while_launching)
{
	setup("error");
	struct result r = run_threads(churner);
	ck_assert_int_eq(r.wrong, 0);
	ck_assert_int_eq(r.refused, THREADS * (ROUNDS / 10));
	ck_assert_int_eq(r.ok, 3 * THREADS * (ROUNDS / 10));
}
END_TEST

/* A refused launch leaves no message behind for the next, successful one. */
START_TEST(error_message_is_per_failure)
{
	setup("error");
	cuCtxSetCurrent(ctx[1]);
	ck_assert_int_eq(launch(fn[0]), CUDA_ERROR_INVALID_HANDLE);
	const char *s = NULL;
	cuGetErrorString(CUDA_ERROR_INVALID_HANDLE, &s);
	ck_assert_msg(s && strstr(s, cg_deepgemm_message), "%s", s);
	const char *name = NULL;
	cuGetErrorName(CUDA_ERROR_INVALID_HANDLE, &name);
	ck_assert_str_eq(name, "CUDA_ERROR_INVALID_HANDLE");
	ck_assert_int_eq(launch(fn[1]), CUDA_SUCCESS);
	cuGetErrorString(CUDA_ERROR_INVALID_HANDLE, &s);
	ck_assert_msg(s && !strstr(s, cg_deepgemm_message), "%s", s);
}
END_TEST

START_TEST(forked_child_starts_clean)
{
	char log[128];
	snprintf(log, sizeof log, "/tmp/ctxguard-fork-%d-%%p.jsonl", (int)getpid());
	setenv("CTXGUARD_LOG", log, 1);
	setup("error");
	cuCtxSetCurrent(ctx[1]);
	ck_assert_int_eq(launch(fn[0]), CUDA_ERROR_INVALID_HANDLE);
	pid_t child = fork();
	if (child == 0) {
		/* The child's own loads are tracked and checked... */
		CUmodule mod;
		CUfunction f;
		cuCtxSetCurrent(ctx[0]);
		if (cuModuleLoadData(&mod, image) || cuModuleGetFunction(&f, mod, EXPERT))
			_exit(10);
		cuCtxSetCurrent(ctx[1]);
		const char *s = NULL;
		if (launch(f) != CUDA_ERROR_INVALID_HANDLE)
			_exit(11);
		cuGetErrorString(CUDA_ERROR_INVALID_HANDLE, &s);
		if (!s || !strstr(s, cg_deepgemm_message))
			_exit(12);
		_exit(0);
	}
	int st;
	waitpid(child, &st, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	/* ...and logged to the child's own file. */
	char path[160];
	snprintf(path, sizeof path, "/tmp/ctxguard-fork-%d-%d.jsonl", (int)getpid(), (int)child);
	char *text = slurp(path);
	ck_assert_msg(text && strstr(text, "\"event\":\"crossing\""), "no child log at %s", path);
	char pid_field[32];
	snprintf(pid_field, sizeof pid_field, "\"pid\":%d", (int)child);
	ck_assert_msg(strstr(text, pid_field), "%s", text);
	unlink(path);
	snprintf(path, sizeof path, "/tmp/ctxguard-fork-%d-%d.jsonl", (int)getpid(), (int)getpid());
	unlink(path);
}
END_TEST

/* An entry point the shim exports but the driver lacks (the fake has no
 * cuStreamDestroy, only cuStreamDestroy_v2): a probe with
 * dlsym(RTLD_DEFAULT) finds the shim's export, and calling it returns an
 * error instead of calling through a null pointer. */
START_TEST(variant_the_driver_lacks)
{
	ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
	ck_assert_msg(!dlsym(dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD), "cuStreamDestroy"),
		      "the fake driver has cuStreamDestroy after all");
	CUresult (*destroy)(CUstream) = (CUresult(*)(CUstream))dlsym(RTLD_DEFAULT, "cuStreamDestroy");
	if (!destroy)
		return; /* not under the shim */
	ck_assert_int_eq(destroy(NULL), CUDA_ERROR_NOT_FOUND);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("threads");
	TCase *t = tcase_create("concurrency");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, sixteen_threads_two_devices);
	tcase_add_test(t, streams_made_and_destroyed_while_launching);
	tcase_add_test(t, error_message_is_per_failure);
	tcase_add_test(t, forked_child_starts_clean);
	tcase_add_test(t, variant_the_driver_lacks);
	suite_add_tcase(s, t);
	return run_suite(s);
}
