/* The shim end to end on the fake driver: every route to the driver, every
 * load API, every launch API, every action, the command, bad input.  Each
 * case runs tests/progs/scenario in a child process under the shim. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../policy/policy.h"
#include "suite.h"
#include "spawn.h"

static const char *const routes[] = {"direct", "dlsym", "dlvsym", "procaddr", "procaddr_v1",
				     "ptsz"};
static const char *const loads[] = {"file", "data", "dataex", "fatbin", "library_file",
				    "library_data", "library_module", "enumerate",
				    "library_enumerate"};
static const char *const launches[] = {"launch", "launchex", "coop", "multidev", "legacy",
				       "graph_add", "graph_add_v2", "graph_set",
				       "graph_set_v2", "graph_exec_set", "graph_exec_set_v2",
				       "graph_node"};
#define N(a) ((int)(sizeof a / sizeof a[0]))

static struct run r;

/* This process's log file for a test (tag), removed, and its setting. */
static char log_path[128], log_env[160];

static void fresh_log(const char *tag)
{
	snprintf(log_path, sizeof log_path, "/tmp/ctxguard-%s-%d.jsonl", tag, (int)getpid());
	snprintf(log_env, sizeof log_env, "CTXGUARD_LOG=%s", log_path);
	unlink(log_path);
}

static void scenario(const char *mode, const char *route, const char *load, const char *api,
		     const char *scase, const char *kernel, const char *extra_env)
{
	char m[64];
	snprintf(m, sizeof m, "CTXGUARD_MODE=%s", mode);
	const char *env[] = {m, extra_env ? extra_env : "CTXGUARD_SCOPE", NULL};
	const char *argv[] = {"tests/progs/scenario", route, load, api, scase, kernel, NULL};
	spawn(&r, env, argv);
}

/* A refused launch: exit 3, and the framework-facing string is the message. */
static void assert_refused(void)
{
	ck_assert_msg(exited(&r, 3), "status %#x\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
	char want[2048];
	snprintf(want, sizeof want, "error string: %s", cg_deepgemm_message);
	ck_assert_msg(strstr(r.out, want), "no message in:\n%s", r.out);
	ck_assert_msg(strstr(r.out, "launch: 400 CUDA_ERROR_INVALID_HANDLE"), "%s", r.out);
	ck_assert_msg(strstr(r.err, "ctxguard: "), "no diagnostics:\n%s", r.err);
}

static void assert_clean(void)
{
	ck_assert_msg(exited(&r, 0), "status %#x\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
	ck_assert_msg(!strstr(r.err, cg_deepgemm_message), "unexpected report:\n%s", r.err);
	ck_assert_msg(strstr(r.err, " 0 crossings"), "summary:\n%s", r.err);
}

START_TEST(every_route_is_seen)
{
	scenario("error", routes[_i], "library_file", "launchex", "cross", "expert", NULL);
	assert_refused();
	if (strncmp(routes[_i], "procaddr", 8) == 0 || strcmp(routes[_i], "ptsz") == 0)
		ck_assert_msg(strstr(r.out, "self-lookup: hooked"),
			      "cuGetProcAddress's self-lookup returned the real one:\n%s", r.out);
}
END_TEST

START_TEST(every_route_same_context_is_clean)
{
	scenario("abort", routes[_i], "data", "launch", "same", "expert", NULL);
	assert_clean();
}
END_TEST

START_TEST(every_launch_api_is_checked)
{
	scenario("error", "procaddr", "data", launches[_i], "cross", "expert", NULL);
	assert_refused();
	ck_assert_msg(strstr(r.err, "via "), "diagnostics name the entry point:\n%s", r.err);
}
END_TEST

START_TEST(every_launch_api_same_context_is_clean)
{
	scenario("abort", "dlsym", "data", launches[_i], "same", "expert", NULL);
	assert_clean();
}
END_TEST

START_TEST(every_load_api_records_the_owner)
{
	scenario("error", "dlsym", loads[_i], "launch", "cross", "expert", NULL);
	assert_refused();
}
END_TEST

START_TEST(every_load_api_same_context_is_clean)
{
	scenario("abort", "direct", loads[_i], "launch", "same", "expert", NULL);
	assert_clean();
}
END_TEST

START_TEST(cukernel_is_never_flagged)
{
	scenario("abort", "dlsym", _i ? "library_data" : "library_file", "launchex", "kernel",
		 "expert", "CTXGUARD_SCOPE=all");
	assert_clean();
}
END_TEST

START_TEST(stream_context_decides)
{
	/* Device 0 current, stream of device 1: the launch is for device 1. */
	scenario("error", "procaddr", "data", "launch", "stream", "expert", NULL);
	assert_refused();
	/* Device 1 current, stream of device 0: runs on device 0, its owner. */
	scenario("abort", "procaddr", "data", "launch", "own_stream", "expert", NULL);
	assert_clean();
}
END_TEST

START_TEST(reused_handle_has_no_stale_owner)
{
	scenario("abort", "dlsym", _i ? "library_data" : "data", "launch", "reuse", "expert", NULL);
	ck_assert_msg(strstr(r.out, "handle reused: yes"), "the fake did not reuse:\n%s", r.out);
	assert_clean();
}
END_TEST

/* A stream's context is remembered for the thread's next launch on it,
 * until a destroy: the handle that comes back is another context's. */
START_TEST(reused_stream_handle_has_no_stale_context)
{
	scenario("error", _i ? "procaddr" : "dlsym", "data", "launch", "stream_reuse", "expert",
		 NULL);
	ck_assert_msg(strstr(r.out, "handle reused: yes"), "the fake did not reuse:\n%s", r.out);
	assert_refused();
}
END_TEST

START_TEST(without_shim_driver_refuses)
{
	const char *env[] = {"LD_PRELOAD=", NULL};
	const char *argv[] = {"tests/progs/scenario", "dlsym", "library_file", "launchex", "cross", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 3), "%s%s", r.out, r.err);
	ck_assert_msg(strstr(r.out, "launch: 400 CUDA_ERROR_INVALID_HANDLE"), "%s", r.out);
	ck_assert(!strstr(r.out, cg_deepgemm_message));
}
END_TEST

/* A count past the list: the driver refuses it unread, and so must the
 * check (it read a million entries off the stack and crashed). */
START_TEST(multidev_count_past_the_list_is_left_to_the_driver)
{
	scenario("abort", "dlsym", "data", "multidev_overcount", _i ? "cross" : "same", "expert",
		 "CTXGUARD_SCOPE=all");
	ck_assert_msg(exited(&r, 3), "status %#x\n%s%s", r.status, r.out, r.err);
	ck_assert_msg(strstr(r.out, "launch: 1 CUDA_ERROR_INVALID_VALUE"), "%s", r.out);
}
END_TEST

START_TEST(abort_prints_message_first)
{
	scenario("abort", "dlsym", "library_file", "launchex", "cross", "expert", NULL);
	ck_assert_msg(killed_by(&r, SIGABRT), "status %#x\n%s", r.status, r.err);
	ck_assert_str_eq(first_line(r.err), cg_deepgemm_message);
	ck_assert_msg(strstr(r.err, "_ZN9deep_gemm19sm90_bf16_gemm_impl"), "%s", r.err);
	ck_assert_msg(strstr(r.err, "device 0") && strstr(r.err, "device 1"), "%s", r.err);
	ck_assert_msg(strstr(r.err, "pid ") && strstr(r.err, "tid "), "%s", r.err);
	ck_assert_msg(strstr(r.err, "cuLibraryLoadFromFile") || strstr(r.err, "cuKernelGetFunction"),
		      "%s", r.err);
	ck_assert_msg(!strstr(r.out, "launch:"), "the launch went through:\n%s", r.out);
}
END_TEST

START_TEST(abort_is_the_default)
{
	const char *env[] = {"CTXGUARD_MODE", NULL};
	const char *argv[] = {"tests/progs/scenario", "direct", "data", "launch", "cross", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(killed_by(&r, SIGABRT), "%s", r.err);
	ck_assert_str_eq(first_line(r.err), cg_deepgemm_message);
}
END_TEST

START_TEST(warn_reports_and_launches)
{
	fresh_log("check");
	scenario("warn", "dlsym", "data", "launch", "cross", "expert", log_env);
	/* The driver itself then refuses the cross-context CUfunction. */
	ck_assert_msg(exited(&r, 3), "%s%s", r.out, r.err);
	ck_assert_msg(strstr(r.out, "launch: 400 CUDA_ERROR_INVALID_HANDLE"), "%s", r.out);
	ck_assert_msg(!strstr(r.out, cg_deepgemm_message), "%s", r.out);
	ck_assert_str_eq(first_line(r.err), cg_deepgemm_message);
	char *text = slurp(log_path);
	ck_assert_msg(text, "no log at %s", log_path);
	ck_assert_msg(strstr(text, "\"event\":\"crossing\"") && strstr(text, "\"action\":\"warn\""),
		      "%s", text);
	ck_assert_msg(strstr(text, "\"event\":\"start\"") && strstr(text, "\"event\":\"summary\""),
		      "%s", text);
	unlink(log_path);
}
END_TEST

/* A record the log cannot take (a full disk: here a file size limit of
 * 512 bytes) is counted and said, not silently dropped. */
START_TEST(lost_log_records_are_reported)
{
	char cmd[4400];
	fresh_log("lost");
	snprintf(cmd, sizeof cmd, "trap '' XFSZ; ulimit -f 1; exec '%s/tests/progs/scenario' dlsym"
		 " data launch cross", build_dir());
	const char *env[] = {"CTXGUARD_MODE=warn", log_env, NULL};
	const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 3), "%s%s", r.out, r.err);
	ck_assert_msg(strstr(r.err, "could not be written to /tmp/ctxguard-lost-"),
		      "%s", r.err);
	unlink(log_path);
}
END_TEST

/* ctypes (the torch ops, the kernels' tests) loads the library after
 * start-up: its TLS must fit the static block's surplus. */
START_TEST(loads_after_start_up)
{
	const char *env[] = {"LD_PRELOAD=", NULL};
	const char *argv[] = {"tests/progs/dlopen", shim_library(), NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 0) && strstr(r.out, "dlopen: ok"), "%s%s", r.out, r.err);
}
END_TEST

/* A library loaded RTLD_LOCAL finds its own symbols with dlsym and dlvsym
 * on RTLD_DEFAULT: the loader searches the caller's local scope too, so
 * the hooks must leave the caller as it was. */
START_TEST(local_library_lookups_keep_the_caller)
{
	char lib[4096];
	snprintf(lib, sizeof lib, "%s/tests/libs/libcgtest.so", build_dir());
	const char *argv[] = {"tests/progs/localdl", lib, NULL};
	spawn(&r, NULL, argv);
	ck_assert_msg(exited(&r, 0) && strstr(r.out, "localdl: ok"), "%s%s", r.out, r.err);
}
END_TEST

/* A child forked while another thread of its parent starts the shim does
 * not wait for a start-up that no thread of its own will finish. */
START_TEST(fork_during_start_up)
{
	char lib[4096], cupti[4200], fifo[128];
	snprintf(lib, sizeof lib, "%s/tests/libs/libcgtest.so", build_dir());
	snprintf(cupti, sizeof cupti, "CTXGUARD_CUPTI=%s", lib);
	snprintf(fifo, sizeof fifo, "/tmp/ctxguard-forkstart-%d", (int)getpid());
	const char *env[] = {"CTXGUARD_BACKSTOP=1", cupti, NULL};
	const char *argv[] = {"tests/progs/forkstart", fifo, NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 0) && strstr(r.out, "forkstart: ok"), "%s%s", r.out, r.err);
}
END_TEST

/* The same with the start-up inside CUPTI's subscribe, the backstop's lock
 * held: the child starts anew and takes that lock itself. */
START_TEST(fork_during_backstop_subscribe)
{
	char cupti[4200], fifo[128];
	snprintf(cupti, sizeof cupti, "CTXGUARD_CUPTI=%s/fake/cupti/libcupti.so", build_dir());
	snprintf(fifo, sizeof fifo, "/tmp/ctxguard-forksub-%d", (int)getpid());
	const char *env[] = {"CTXGUARD_BACKSTOP=1", cupti, NULL};
	const char *argv[] = {"tests/progs/forkstart", fifo, "CG_FAKE_CUPTI_HOLD", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 0) && strstr(r.out, "forkstart: ok"), "%s%s", r.out, r.err);
}
END_TEST

/* The fake driver's own checks of the semantics the suites rely on
 * (tests/progs/fake_selftest), without the shim: run here so that they
 * cannot drift from the fake unnoticed. */
START_TEST(fake_driver_selftest)
{
	const char *env[] = {preload_without_shim(), NULL};
	const char *argv[] = {"tests/progs/fake_selftest", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 0) && strstr(r.out, "fake_selftest: all checks passed"), "status %#x\n%s%s",
		      r.status, r.out, r.err);
}
END_TEST

/* A thread inside dlopen (holding the loader lock) that makes hooked calls
 * while another thread's start-up waits for that lock stops waiting after
 * a bounded time instead of deadlocking: its lookups are answered as after
 * start-up, its calls pass through unchecked, said once start-up is done
 * (and an audit fails). */
START_TEST(start_up_waits_for_the_loader_lock)
{
	char lib[4096], prog[4096], cupti[4200], policy[128], env_policy[160];
	snprintf(lib, sizeof lib, "%s/tests/libs/libcgtest.so", build_dir());
	snprintf(prog, sizeof prog, "%s/tests/progs/loaderlock", build_dir());
	snprintf(cupti, sizeof cupti, "CTXGUARD_CUPTI=%s/fake/cupti/libcupti.so", build_dir());
	snprintf(policy, sizeof policy, "/tmp/ctxguard-loaderlock-%d.conf", (int)getpid());
	fresh_log("loaderlock");
	snprintf(env_policy, sizeof env_policy, "CTXGUARD_POLICY=%s", policy);
	FILE *f = fopen(policy, "w");
	ck_assert_ptr_nonnull(f);
	fputs("mode = abort\n", f);
	fclose(f);
	const char *env[] = {preload_without_shim(), env_policy, cupti, NULL};
	const char *argv[] = {"ctxguard", "--audit", "--error-exitcode", "9", "--log", log_path,
			      "--", prog, lib, policy, NULL};
	spawn(&r, env, argv);
	unlink(policy);
	ck_assert_msg(exited(&r, 9) && strstr(r.out, "loaderlock: ok"), "status %#x\n%s%s",
		      r.status, r.out, r.err);
	ck_assert_msg(strstr(r.err, "ctxguard: 2 calls (the first cuGetErrorString) passed "
				    "unchecked") &&
			      strstr(r.err, "ctxguard: 1 process let calls pass unchecked"),
		      "%s", r.err);
	char *text = slurp(log_path);
	ck_assert_msg(text && strstr(text, "\"event\":\"unchecked\"") &&
			      strstr(text, "\"calls\":2,\"first\":\"cuGetErrorString\""),
		      "%s", text ? text : log_path);
	unlink(log_path);
}
END_TEST

/* An entry point that cuGetProcAddress answers with a function ctxguard
 * cannot map to its wrapper (no libcuda export) escapes the hooks: here
 * cuGetErrorString gives the driver's own text for a refused launch.  Said
 * once on stderr and in an "unmapped" log record, whose CUDA version is
 * cuda_version (version is ctxguard's, in every record). */
START_TEST(unmapped_entry_point_is_said)
{
	fresh_log("unmapped");
	const char *env[] = {"CTXGUARD_MODE=error", "FAKE_CUDA_UNEXPORTED=cuGetErrorString", log_env, NULL};
	const char *argv[] = {"tests/progs/scenario", "procaddr", "data", "launch", "cross",
			      "expert", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 3) && strstr(r.out, "launch: 400") &&
			      !strstr(r.out, cg_deepgemm_message),
		      "status %#x\n%s%s", r.status, r.out, r.err);
	ck_assert_msg(count_of(r.err, "ctxguard: cuGetProcAddress(\"cuGetErrorString\", 6000, 0) "
				      "returned ") == 1 &&
			      strstr(r.err, "which is not a libcuda export ctxguard knows"),
		      "%s", r.err);
	char *text = slurp(log_path);
	unlink(log_path);
	const char *rec = text ? strstr(text, "{\"event\":\"unmapped\",") : NULL;
	ck_assert_msg(rec, "%s", text ? text : "no log");
	char line[1024];
	snprintf(line, sizeof line, "%.*s", (int)strcspn(rec, "\n"), rec);
	ck_assert_msg(strstr(line, ",\"symbol\":\"cuGetErrorString\",\"cuda_version\":6000,"
				   "\"flags\":0}") &&
			      count_of(line, "\"version\":") == 1,
		      "%s", line);
}
END_TEST

/* An unmapped entry point whose calls leave launches unchecked fails
 * --audit: a module loaded through cuModuleLoadData's is never tracked, so
 * a crossing of its kernels would pass.  One that ctxguard hooks for
 * another reason (cuGetErrorString, the error action's message) is said
 * but passes; one that ctxguard does not hook (cuGetErrorName) loses no
 * wrapper: nothing is said. */
START_TEST(audit_fails_on_unmapped_hooked_entry_points)
{
	static const char *const unexported[] = {"cuModuleLoadData", "cuGetErrorName", "cuGetErrorString"};
	char prog[4096], cupti[4200], fake[64];
	snprintf(prog, sizeof prog, "%s/tests/progs/scenario", build_dir());
	snprintf(cupti, sizeof cupti, "CTXGUARD_CUPTI=%s/fake/cupti/libcupti.so", build_dir());
	snprintf(fake, sizeof fake, "FAKE_CUDA_UNEXPORTED=%s", unexported[_i]);
	const char *env[] = {preload_without_shim(), cupti, fake, NULL};
	const char *argv[] = {"ctxguard", "--audit", "--error-exitcode", "7", "--", prog,
			      "procaddr", "data", "launch", "same", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(strstr(r.out, "launch: 0 CUDA_SUCCESS"), "%s%s", r.out, r.err);
	if (_i == 0) {
		ck_assert_msg(exited(&r, 7) &&
				      count_of(r.err, "ctxguard: cuGetProcAddress(\"cuModuleLoadData\", "
						      "2000, 0) returned ") == 1 &&
				      strstr(r.err, "ctxguard: 1 process got entry points from "
						    "cuGetProcAddress that ctxguard could not hook "
						    "(unmapped; "),
			      "status %#x\n%s", r.status, r.err);
	} else if (_i == 1) {
		ck_assert_msg(exited(&r, 0) && !strstr(r.err, "cuGetProcAddress(") &&
				      !strstr(r.err, "unmapped"),
			      "status %#x\n%s", r.status, r.err);
	} else {
		ck_assert_msg(exited(&r, 0) && strstr(r.err, "cuGetProcAddress(\"cuGetErrorString\"") &&
				      !strstr(r.err, "(unmapped; "),
			      "status %#x\n%s", r.status, r.err);
	}
}
END_TEST

START_TEST(off_is_silent)
{
	scenario("off", "dlsym", "data", "launch", "cross", "expert", NULL);
	ck_assert_msg(exited(&r, 3), "%s", r.err);
	ck_assert_msg(!strstr(r.err, cg_deepgemm_message), "%s", r.err);
}
END_TEST

START_TEST(scope_decides_for_other_kernels)
{
	/* A kernel no rule calls an expert: left alone by default... */
	scenario("error", "dlsym", "data", "launch", "cross", "plain", NULL);
	ck_assert_msg(exited(&r, 3), "%s", r.err);
	ck_assert_msg(!strstr(r.err, "ctxguard: kernel") && !strstr(r.out, "ctxguard"), "%s%s",
		      r.out, r.err);
	/* ...checked with scope all, with the generic message. */
	scenario("error", "dlsym", "data", "launch", "cross", "plain", "CTXGUARD_SCOPE=all");
	ck_assert_msg(exited(&r, 3), "%s", r.err);
	ck_assert_msg(strstr(r.out, "error string: ") && strstr(r.out, "vector_add"), "%s", r.out);
	ck_assert_msg(!strstr(r.out, cg_deepgemm_message), "%s", r.out);
}
END_TEST

START_TEST(summary_line_at_exit)
{
	scenario("abort", "procaddr", "data", "launch", "same", "expert", NULL);
	/* singular where the count is 1 */
	ck_assert_msg(strstr(r.err, ": 1 module, 1 function tracked (1 expert), 1 launch checked,"
			     " 0 crossings (abort 0, error 0, warn 0, off 0, redirect 0)\n"), "%s", r.err);
	const char *env[] = {"CTXGUARD_QUIET=1", NULL};
	const char *argv[] = {"tests/progs/scenario", "procaddr", "data", "launch", "same", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 0) && !strstr(r.err, "launch checked"), "%s", r.err);
}
END_TEST

START_TEST(bad_mode_falls_back_to_abort)
{
	scenario("sometimes", "dlsym", "data", "launch", "cross", "expert", NULL);
	ck_assert_msg(killed_by(&r, SIGABRT), "%s", r.err);
	ck_assert_msg(strstr(r.err, "CTXGUARD_MODE=sometimes"), "%s", r.err);
	ck_assert_int_eq(count_of(r.err, "CTXGUARD_MODE=sometimes"), 1);
}
END_TEST

START_TEST(bad_policy_file_is_one_line)
{
	char path[128], env[160];
	snprintf(path, sizeof path, "/tmp/ctxguard-check-policy-%d.conf", (int)getpid());
	FILE *f = fopen(path, "w");
	ck_assert(f);
	fputs("mode = error\nfrobnicate = yes\n", f);
	fclose(f);
	snprintf(env, sizeof env, "CTXGUARD_POLICY=%s", path);
	const char *envs[] = {env, "CTXGUARD_MODE", NULL};
	const char *argv[] = {"tests/progs/scenario", "dlsym", "data", "launch", "cross", NULL};
	spawn(&r, envs, argv);
	unlink(path);
	/* The good line still applies; the bad one is named once. */
	ck_assert_msg(exited(&r, 3), "%s", r.err);
	ck_assert_msg(count_of(r.err, "frobnicate") == 1 && strstr(r.err, ":2:"), "%s", r.err);
}
END_TEST

START_TEST(command_runs_and_exits_like_the_program)
{
	const char *argv[] = {"ctxguard", "--", "tests/progs/scenario", "dlsym", "data", "launch",
			      "same", NULL};
	char prog[4096];
	snprintf(prog, sizeof prog, "%s/tests/progs/scenario", build_dir());
	argv[2] = prog;
	const char *env[] = {preload_without_shim(), NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 0), "%s%s", r.out, r.err);
	ck_assert_msg(strstr(r.err, " 0 crossings"), "%s", r.err);

	const char *cross[] = {"ctxguard", "--mode", "error", "--error-exitcode", "86", "--",
			       prog, "dlsym", "data", "launch", "cross", NULL};
	spawn(&r, env, cross);
	ck_assert_msg(exited(&r, 86), "status %#x %s", r.status, r.err);
	ck_assert_msg(strstr(r.out, cg_deepgemm_message), "%s", r.out);
	ck_assert_msg(strstr(r.err, "1 crossing reported"), "%s", r.err);

	const char *aborting[] = {"ctxguard", "--", prog, "dlsym", "data", "launch", "cross", NULL};
	spawn(&r, env, aborting);
	ck_assert_msg(exited(&r, 128 + SIGABRT), "status %#x %s", r.status, r.err);
	ck_assert_str_eq(first_line(r.err), cg_deepgemm_message);

	const char *version[] = {"ctxguard", "--version", NULL};
	spawn(&r, env, version);
	ck_assert_msg(exited(&r, 0) && strncmp(r.out, "ctxguard " CTXGUARD_VERSION " (system policy ",
					       strlen("ctxguard " CTXGUARD_VERSION " (system policy ")) == 0,
		      "%s", r.out);

	const char *bad[] = {"ctxguard", "--mode", "sometimes", "--", prog, NULL};
	spawn(&r, env, bad);
	ck_assert_msg(exited(&r, 2) && strstr(r.err, "--mode sometimes"), "%s", r.err);
}
END_TEST

/* "../../" for each directory of the working directory, then path without
 * its leading '/': path, relative to where the command runs. */
static const char *relative_to_cwd(const char *path)
{
	static char rel[8192];
	char cwd[4096], abs[4096];
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
	ck_assert_ptr_nonnull(realpath(path, abs));
	rel[0] = 0;
	for (const char *c = cwd; *c; c++)
		if (*c == '/' && c[1])
			strcat(rel, "../");
	strcat(rel, abs + 1);
	return rel;
}

/* The command's paths reach every process of the tree: a relative
 * --library or --policy once left a process that changed its directory
 * unpreloaded (running unchecked) or without its policy.  And
 * --error-exitcode takes what CTXGUARD_EXIT_CODE takes: "+86" once passed
 * here, was refused by the policy, and the crossing exited 0. */
START_TEST(command_paths_and_exit_code)
{
	char prog[4096], policy[4096], lib[4096], script[12288];
	snprintf(prog, sizeof prog, "%s/tests/progs/scenario", build_dir());
	snprintf(lib, sizeof lib, "%s", relative_to_cwd(shim_library()));
	snprintf(policy, sizeof policy, "%s", relative_to_cwd("policy/default.conf"));
	snprintf(script, sizeof script,
		 "cd / && case $CTXGUARD_POLICY:$LD_PRELOAD in /*) ;; *) exit 9;; esac; "
		 "exec '%s' dlsym data launch cross", prog);
	const char *env[] = {preload_without_shim(), NULL};
	const char *argv[] = {"ctxguard", "--library", lib, "--policy", policy, "--mode", "error",
			      "--error-exitcode", "86", "--", "/bin/sh", "-c", script, NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 86), "status %#x %s", r.status, r.err);
	ck_assert_msg(strstr(r.err, "1 crossing reported") && !strstr(r.err, "ld.so"), "%s",
		      r.err);

	static const char *const bad[] = {"+86", " 86", "", "-0"};
	for (int i = 0; i < N(bad); i++) {
		const char *plus[] = {"ctxguard", "--mode", "error", "--error-exitcode", bad[i],
				      "--", prog, "dlsym", "data", "launch", "cross", NULL};
		spawn(&r, env, plus);
		ck_assert_msg(exited(&r, 2) && strstr(r.err, "--error-exitcode"),
			      "'%s': status %#x %s", bad[i], r.status, r.err);
	}
}
END_TEST

START_TEST(inert_without_libcuda)
{
	const char *env[] = {"CTXGUARD_LIBCUDA=/nonexistent/libcuda.so.1", "LD_LIBRARY_PATH=",
			     NULL};
	const char *argv[] = {"tests/progs/nocuda", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 0), "status %#x\n%s%s", r.status, r.out, r.err);
	ck_assert_msg(r.err[0] == 0, "inert library wrote:\n%s", r.err);
	ck_assert_msg(strstr(r.out, "nocuda: ok"), "%s", r.out);
}
END_TEST

/* A driver path that names nothing loaded, while the program's own
 * libcuda.so.1 is: one line says so, and the shim checks that driver
 * (every call failed with CUDA_ERROR_NOT_INITIALIZED, nothing said). */
START_TEST(libcuda_path_not_loaded_is_said)
{
	const char *env[] = {"CTXGUARD_LIBCUDA=/nonexistent/libcuda.so.1", "CTXGUARD_MODE=error",
			     NULL};
	const char *argv[] = {"tests/progs/scenario", "direct", "data", "launch", "cross", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(exited(&r, 3), "status %#x\n%s%s", r.status, r.out, r.err);
	ck_assert_msg(strstr(r.out, "launch: 400 CUDA_ERROR_INVALID_HANDLE"), "%s", r.out);
	ck_assert_msg(count_of(r.err, "CTXGUARD_LIBCUDA=/nonexistent/libcuda.so.1") == 1 &&
		      strstr(r.err, "libcuda.so.1 the program loaded"), "%s", r.err);
}
END_TEST

/* Control bytes in the policy path, the log path and a kernel name (ESC,
 * BEL, newline, C1 CSI raw and as UTF-8, bytes that are no UTF-8) reach
 * stderr escaped, as in the log: every line is ctxguard's own and plain. */
START_TEST(terminal_control_bytes_are_escaped)
{
	const char *env[] = {"CTXGUARD_POLICY=/nonexistent/\x1b]0;title\x07\nctxguard: forged\x9b\xff.conf",
			     "CTXGUARD_LOG=/nonexistent/\x1b[2J\x9b\xfflog.jsonl",
			     "CTXGUARD_MODE=warn", "CTXGUARD_SCOPE=all", NULL};
	const char *argv[] = {"tests/progs/scenario", "dlsym", "data", "launch", "cross",
			      "evil\x1b[31m\xc2\x9b\x9b\xffname", NULL};
	spawn(&r, env, argv);
	/* warn: the launch goes on, and the driver refuses it */
	ck_assert_msg(exited(&r, 3), "status %#x\n%s%s", r.status, r.out, r.err);
	ck_assert_msg(strstr(r.err, "evil\\u001b[31m\\u009b\\ufffd\\ufffdname") &&
		      strstr(r.err, "\\u001b]0;title\\u0007\\nctxguard: forged\\ufffd\\ufffd.conf") &&
		      strstr(r.err, "\\u001b[2J\\ufffd\\ufffdlog.jsonl"), "%s", r.err);
	for (const char *line = r.err; *line; line = strchr(line, '\n') + 1) {
		ck_assert_msg(strncmp(line, "ctxguard: ", 10) == 0, "a line not ours:\n%s", line);
		if (!strchr(line, '\n'))
			break;
	}
	for (const unsigned char *c = (const unsigned char *)r.err; *c; c++)
		ck_assert_msg(*c == '\n' || (*c >= 0x20 && *c < 0x7f), "byte %#x raw on stderr:\n%s",
			      *c, r.err);
}
END_TEST

/* With a driver installed but never loaded by the program, the shim
 * leaves it unloaded. */
START_TEST(never_loads_the_driver_itself)
{
	const char *argv[] = {"tests/progs/nocuda", NULL};
	spawn(&r, NULL, argv);
	ck_assert_msg(exited(&r, 0), "status %#x\n%s%s", r.status, r.out, r.err);
	ck_assert_msg(strstr(r.out, "nocuda: ok"), "%s", r.out);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("launch");
	TCase *t = tcase_create("routes");
	tcase_set_timeout(t, 60);
	tcase_add_loop_test(t, every_route_is_seen, 0, N(routes));
	tcase_add_loop_test(t, every_route_same_context_is_clean, 0, N(routes));
	suite_add_tcase(s, t);
	t = tcase_create("apis");
	tcase_set_timeout(t, 60);
	tcase_add_loop_test(t, every_launch_api_is_checked, 0, N(launches));
	tcase_add_loop_test(t, every_launch_api_same_context_is_clean, 0, N(launches));
	tcase_add_loop_test(t, every_load_api_records_the_owner, 0, N(loads));
	tcase_add_loop_test(t, every_load_api_same_context_is_clean, 0, N(loads));
	tcase_add_loop_test(t, cukernel_is_never_flagged, 0, 2);
	tcase_add_test(t, stream_context_decides);
	tcase_add_loop_test(t, reused_handle_has_no_stale_owner, 0, 2);
	tcase_add_loop_test(t, reused_stream_handle_has_no_stale_context, 0, 2);
	tcase_add_test(t, without_shim_driver_refuses);
	tcase_add_loop_test(t, multidev_count_past_the_list_is_left_to_the_driver, 0, 2);
	suite_add_tcase(s, t);
	t = tcase_create("actions");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, abort_prints_message_first);
	tcase_add_test(t, abort_is_the_default);
	tcase_add_test(t, warn_reports_and_launches);
	tcase_add_test(t, lost_log_records_are_reported);
	tcase_add_test(t, off_is_silent);
	tcase_add_test(t, fake_driver_selftest);
	tcase_add_test(t, unmapped_entry_point_is_said);
	tcase_add_loop_test(t, audit_fails_on_unmapped_hooked_entry_points, 0, 3);
	tcase_add_test(t, loads_after_start_up);
	tcase_add_test(t, local_library_lookups_keep_the_caller);
	tcase_add_test(t, fork_during_start_up);
	tcase_add_test(t, fork_during_backstop_subscribe);
	tcase_add_test(t, start_up_waits_for_the_loader_lock);
	tcase_add_test(t, scope_decides_for_other_kernels);
	tcase_add_test(t, summary_line_at_exit);
	tcase_add_test(t, bad_mode_falls_back_to_abort);
	tcase_add_test(t, bad_policy_file_is_one_line);
	tcase_add_test(t, command_runs_and_exits_like_the_program);
	tcase_add_test(t, command_paths_and_exit_code);
	tcase_add_test(t, inert_without_libcuda);
	tcase_add_test(t, libcuda_path_not_loaded_is_said);
	tcase_add_test(t, terminal_control_bytes_are_escaped);
	tcase_add_test(t, never_loads_the_driver_itself);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return run_suite(suite());
}
