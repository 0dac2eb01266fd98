/* What an operator collects from a fleet: each record's time, host, pid,
 * tid, version and job identity (present and absent), both devices' PCI
 * bus id and UUID, log path expansion, syslog (crossings, and the records
 * that fail an audit), the metrics file, a fork child's identity, and
 * silence from a process that did nothing.  Runs in the Check binary
 * itself, under the shim, each test in its own process. */
#include <check.h>
#include <pthread.h>
#include <cuda.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../policy/policy.h"
#include "suite.h"
#include "spawn.h"
#include "tmpdir.h"

#define EXPERT "_ZN9deep_gemm19sm90_bf16_gemm_implILj0EEEvPijjj14CUtensorMap_stS2_S2_"
static const char image[] = "//ctxguard-fake-image\n.kernel " EXPERT " 8,4,4,4,128,128,128\n";

/* The fake's devices 0 and 1, as cuDeviceGetPCIBusId / cuDeviceGetUuid
 * give them (tests/fake/device.c). */
#define PCI0 "0000:18:00.0"
#define PCI1 "0000:19:00.0"
#define UUID0 "GPU-5a6b7c8d-9eaf-c0d1-e2f3-041526374859"
#define UUID1 "GPU-5b6c7d8e-9fb0-c1d2-e3f4-05162738495a"

static const char *const job_env[][2] = {
	{"RANK", "rank"},
	{"LOCAL_RANK", "local_rank"},
	{"WORLD_SIZE", "world_size"},
	{"TORCHELASTIC_RUN_ID", "torchelastic_run_id"},
	{"SLURM_JOB_ID", "slurm_job_id"},
	{"SLURM_PROCID", "slurm_procid"},
	{"SLURM_LOCALID", "slurm_localid"},
	{"POD_NAME", "pod"},
	{"POD_NAMESPACE", "namespace"},
};
#define NJOB (sizeof job_env / sizeof job_env[0])

static CUcontext ctx[2];
static CUfunction fn0;     /* loaded in device 0's context */
static char log_path[256];

static void unset_job(void)
{
	for (size_t i = 0; i < NJOB; i++)
		unsetenv(job_env[i][0]);
}

/* Log to a file of this test's own (tpl may hold %p, %h, %r). */
static void log_to(const char *tpl)
{
	snprintf(log_path, sizeof log_path, "/tmp/ctxguard-fleet-%d%s", (int)getpid(), tpl);
	setenv("CTXGUARD_LOG", log_path, 1);
}

/* fn0 in device 0's context; a fork child loads its own (the shim's
 * registries start empty there, as CUDA state does not survive fork). */
static void load(void)
{
	CUmodule mod;
	ck_assert_int_eq(cuCtxSetCurrent(ctx[0]), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
	ck_assert_int_eq(cuModuleGetFunction(&fn0, mod, EXPERT), CUDA_SUCCESS);
}

static void setup(const char *mode)
{
	setenv("CTXGUARD_MODE", mode, 1);
	ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
	for (int d = 1; d >= 0; d--) {
		CUdevice dev;
		ck_assert_int_eq(cuDeviceGet(&dev, d), CUDA_SUCCESS);
		ck_assert_int_eq(cuDevicePrimaryCtxRetain(&ctx[d], dev), CUDA_SUCCESS);
	}
	load();
}

/* fn0 launched on device 1: a kind (a) crossing (which the driver
 * refuses when ctxguard lets it through). */
static CUresult cross(void)
{
	CUtensorMap arg[7];
	memset(arg, 0, sizeof arg);
	void *params[7] = {&arg[0], &arg[1], &arg[2], &arg[3], &arg[4], &arg[5], &arg[6]};
	ck_assert_int_eq(cuCtxSetCurrent(ctx[1]), CUDA_SUCCESS);
	return cuLaunchKernel(fn0, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
}

/* Child bodies for spawn_fn: one or two crossings under warn. */
static void one_launch(void)
{
	setup("warn");
	cross();
}

static void two_launches(void)
{
	one_launch();
	cross();
}

static struct run r;

/* The line of text holding `event`, copied; NULL if none. */
static char *record(const char *text, const char *event)
{
	char key[64];
	snprintf(key, sizeof key, "{\"event\":\"%s\"", event);
	const char *s = text ? strstr(text, key) : NULL;
	return s ? strndup(s, strcspn(s, "\n")) : NULL;
}

static void assert_has(const char *text, const char *part)
{
	ck_assert_msg(text && strstr(text, part), "missing %s in:\n%s", part, text ? text : "(none)");
}

static void assert_matches(const char *text, const char *re)
{
	regex_t r;
	ck_assert_int_eq(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
	ck_assert_msg(text && regexec(&r, text, 0, NULL, 0) == 0, "no match for %s in:\n%s", re,
		      text ? text : "(none)");
	regfree(&r);
}

/* What every record carries, whatever the environment. */
static void assert_common(const char *rec, long pid)
{
	char want[512], host[256];
	gethostname(host, sizeof host);
	assert_matches(rec, "^\\{\"event\":\"[a-z_]+\",\"time\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T"
			    "[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z\",\"tid\":[0-9]+,");
	snprintf(want, sizeof want, ",\"pid\":%ld,\"version\":\"%s\",\"host\":\"%s\"", pid,
		 CTXGUARD_VERSION, host);
	assert_has(rec, want);
}

/* The value of the first sample of a metrics file whose line starts with
 * name_open and whose labels end with labels_close; -1 when none. */
static long metric(const char *text, const char *name_open, const char *labels_close)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *end = strchr(l, '}');
		size_t k = strlen(labels_close);
		if (strncmp(l, name_open, strlen(name_open)) == 0 && end &&
		    end + 1 - l >= (long)k && strncmp(end + 1 - k, labels_close, k) == 0)
			return strtol(end + 1, NULL, 10);
	}
	return -1;
}

START_TEST(every_record_carries_the_job)
{
	for (size_t i = 0; i < NJOB; i++) {
		char v[32];
		snprintf(v, sizeof v, "v%zu", i);
		setenv(job_env[i][0], v, 1);
	}
	log_to(".jsonl");
	pid_t child = spawn_fn(&r, one_launch);
	ck_assert_msg(exited(&r, 0), "status %#x\n%s", r.status, r.err);
	char *text = slurp(log_path);
	unlink(log_path);
	static const char *const events[] = {"start", "crossing", "summary"};
	for (size_t e = 0; e < 3; e++) {
		char *rec = record(text, events[e]);
		assert_common(rec, child);
		for (size_t i = 0; i < NJOB; i++) {
			char want[64];
			snprintf(want, sizeof want, ",\"%s\":\"v%zu\"", job_env[i][1], i);
			assert_has(rec, want);
		}
		free(rec);
	}
	char *rec = record(text, "crossing");
	assert_has(rec, ",\"owner_dev\":0,\"owner_pci\":\"" PCI0 "\",\"owner_uuid\":\"" UUID0 "\",");
	assert_has(rec, ",\"launch_dev\":1,\"launch_pci\":\"" PCI1 "\",\"launch_uuid\":\"" UUID1 "\",");
	free(rec);
}
END_TEST

START_TEST(no_job_no_job_keys)
{
	unset_job();
	log_to(".jsonl");
	setup("warn");
	cross();
	char *text = slurp(log_path);
	unlink(log_path);
	char *rec = record(text, "crossing");
	assert_common(rec, getpid());
	for (size_t i = 0; i < NJOB; i++) {
		char key[64];
		snprintf(key, sizeof key, "\"%s\":", job_env[i][1]);
		ck_assert_msg(!strstr(text, key), "%s without %s:\n%s", key, job_env[i][0], text);
	}
	free(rec);
}
END_TEST

/* %p pid, %h host, %r RANK, else SLURM_PROCID, else "-"; outside values
 * never make a directory step. */
START_TEST(log_path_expands)
{
	static const char *const rank[] = {"5", NULL, NULL, "../up"};
	static const char *const procid[] = {"9", "7", NULL, NULL};
	static const char *const shown[] = {"5", "7", "-", "_._up"};
	unset_job();
	if (rank[_i])
		setenv("RANK", rank[_i], 1);
	if (procid[_i])
		setenv("SLURM_PROCID", procid[_i], 1);
	log_to("-%h.%r.%p.%%.jsonl");
	setup("warn");
	cross();
	char host[256], path[512];
	gethostname(host, sizeof host);
	snprintf(path, sizeof path, "/tmp/ctxguard-fleet-%d-%s.%s.%d.%%.jsonl", (int)getpid(), host,
		 shown[_i], (int)getpid());
	char *text = slurp(path);
	unlink(path);
	assert_has(text, "{\"event\":\"crossing\"");
}
END_TEST

/* A datagram socket of the test's own stands in for /dev/log, named in
 * CTXGUARD_LOG; syslog_close removes it. */
static struct sockaddr_un syslog_addr = {.sun_family = AF_UNIX};

static int syslog_socket(void)
{
	snprintf(syslog_addr.sun_path, sizeof syslog_addr.sun_path, "/tmp/ctxguard-fleet-%d.sock",
		 (int)getpid());
	unlink(syslog_addr.sun_path);
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);
	ck_assert_int_ge(s, 0);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&syslog_addr, sizeof syslog_addr), 0);
	char log[160];
	snprintf(log, sizeof log, "syslog:%s", syslog_addr.sun_path);
	setenv("CTXGUARD_LOG", log, 1);
	return s;
}

static void syslog_close(int s)
{
	close(s);
	unlink(syslog_addr.sun_path);
}

/* One line per crossing, at the action's priority, nothing else. */
START_TEST(syslog_gets_one_line_per_crossing)
{
	static const char *const modes[] = {"warn", "error"};
	static const char *const prio[] = {"<12>", "<11>"};   /* LOG_USER|LOG_WARNING, |LOG_ERR */
	int s = syslog_socket();
	setenv("RANK", "4", 1);
	setup(modes[_i]);
	cross();
	cross();
	char buf[16384];
	for (int k = 0; k < 2; k++) {
		ssize_t n = recv(s, buf, sizeof buf - 1, MSG_DONTWAIT);
		ck_assert_msg(n > 0, "datagram %d missing", k);
		buf[n] = 0;
		ck_assert_msg(strncmp(buf, prio[_i], 4) == 0, "%s", buf);
		char tag[64];
		snprintf(tag, sizeof tag, " ctxguard[%d]: {\"event\":\"crossing\",", (int)getpid());
		assert_has(buf, tag);
		assert_has(buf, ",\"rank\":\"4\",");
		assert_has(buf, "\"launch_uuid\":\"" UUID1 "\"");
		ck_assert_ptr_null(strchr(buf, '\n'));
	}
	ck_assert_int_lt(recv(s, buf, sizeof buf, MSG_DONTWAIT), 0);
	syslog_close(s);
}
END_TEST

/* 40 logged crossings: a kernel's first few are logged, the rest counted,
 * so each module loaded again brings a new kernel. */
enum { BURST = 40 };
static void crossing_burst(void)
{
	setup("warn");
	for (int i = 0; i < BURST; i++) {
		if (i && i % 4 == 0)
			load();
		cross();
	}
}

/* A burst the syslog socket's queue cannot hold: what it drops is counted
 * as lost records, so that each crossing is either delivered or counted. */
START_TEST(syslog_drops_counted)
{
	unset_job();
	int s = syslog_socket();
	char metrics[160];
	snprintf(metrics, sizeof metrics, "/tmp/ctxguard-fleet-%d.prom", (int)getpid());
	setenv("CTXGUARD_METRICS", metrics, 1);
	spawn_fn(&r, crossing_burst);
	char buf[16384];
	int got = 0;
	while (recv(s, buf, sizeof buf, MSG_DONTWAIT) > 0)
		got++;
	syslog_close(s);
	char *text = slurp(metrics);
	unlink(metrics);
	long lost = metric(text, "ctxguard_log_records_lost_total{", "}");
	ck_assert_msg(got < BURST && lost == BURST - got, "%d delivered, %ld counted lost in\n%s",
		      got, lost, text ? text : "no metrics");
}
END_TEST

/* The children of syslog_gets_the_audit_records, each making one record
 * that says the process ran partly unchecked. */
static void constructor_during_start_up(void)
{
	char lib[4096], policy[128], env_policy[160];
	snprintf(lib, sizeof lib, "%s/tests/libs/libcgtest.so", build_dir());
	snprintf(policy, sizeof policy, "/tmp/ctxguard-fleet-%d.conf", (int)getpid());
	snprintf(env_policy, sizeof env_policy, "CTXGUARD_POLICY=%s", policy);
	write_to(policy, "# watched by the constructor\n", 0);
	const char *env[] = {env_policy, NULL};
	const char *argv[] = {"tests/progs/loaderlock", lib, policy, NULL};
	spawn(&r, env, argv);
	unlink(policy);
}

static void launch_past_the_hooks(void)
{
	char cupti[4200];
	snprintf(cupti, sizeof cupti, "CTXGUARD_CUPTI=%s/fake/cupti/libcupti.so", build_dir());
	const char *env[] = {"CTXGUARD_BACKSTOP=on", cupti, NULL};
	const char *argv[] = {"tests/progs/unhooked", "launch", "same", "none", NULL};
	spawn(&r, env, argv);
}

static void lookup_unexported(void)
{
	setenv("FAKE_CUDA_UNEXPORTED", "cuGetErrorString", 1);
	void *p = NULL;
	CUdriverProcAddressQueryResult status;
	if (cuGetProcAddress("cuGetErrorString", &p, 12000, 0, &status) != CUDA_SUCCESS || !p)
		exit(21);
}

static void unmapped_lookup(void)
{
	spawn_fn(&r, lookup_unexported);
}

static const struct {
	void (*run)(void);         /* the child, its output in r */
	const char *record;        /* the line's record, from its start */
	const char *holds;         /* a part of it */
} audit_records[] = {
	{constructor_during_start_up, "]: {\"event\":\"unchecked\",",
	 "\"calls\":2,\"first\":\"cuGetErrorString\""},
	{launch_past_the_hooks, "]: {\"event\":\"unhooked\",",
	 "\"api\":\"cuLaunchKernel\",\"kernel\":\"" EXPERT "\""},
	{unmapped_lookup, "]: {\"event\":\"unmapped\",",
	 "\"symbol\":\"cuGetErrorString\",\"cuda_version\":12000,"},
};

/* The records that say a process ran partly unchecked go to syslog too,
 * once each, at warning, err when the policy's mode stops crossings; the
 * start, backstop and summary records of those processes do not. */
START_TEST(syslog_gets_the_audit_records)
{
	static const char *const modes[] = {"warn", "redirect", "error", "abort"};
	static const char *const prio[] = {"<12>", "<12>", "<11>", "<11>"};
	int m = _i % 4, k = _i / 4;
	int s = syslog_socket();
	setenv("CTXGUARD_MODE", modes[m], 1);
	audit_records[k].run();
	ck_assert_msg(exited(&r, 0), "status %#x\n%s%s", r.status, r.out, r.err);
	char buf[16384];
	int lines = 0;
	for (ssize_t n; (n = recv(s, buf, sizeof buf - 1, MSG_DONTWAIT)) > 0; lines++) {
		buf[n] = 0;
		ck_assert_msg(strncmp(buf, prio[m], 4) == 0, "%s: %s", modes[m], buf);
		assert_has(buf, audit_records[k].record);
		assert_has(buf, audit_records[k].holds);
	}
	ck_assert_msg(lines == 1, "%d lines on syslog for %s\n%s", lines, audit_records[k].record,
		      r.err);
	syslog_close(s);
}
END_TEST

/* At exit, the counters in Prometheus text format, renamed into place. */
START_TEST(metrics_file_at_exit)
{
	unset_job();
	setenv("RANK", "2", 1);
	char tpl[128], path[160];
	snprintf(tpl, sizeof tpl, "/tmp/ctxguard-fleet-%d.%%r.prom", (int)getpid());
	snprintf(path, sizeof path, "/tmp/ctxguard-fleet-%d.2.prom", (int)getpid());
	setenv("CTXGUARD_METRICS", tpl, 1);
	pid_t child = spawn_fn(&r, two_launches);
	char *text = slurp(path);
	unlink(path);
	/* host and job identity label the series, never the pid */
	char want[512], host[256];
	gethostname(host, sizeof host);
	snprintf(want, sizeof want, "ctxguard_launches_total{host=\"%s\",rank=\"2\"} 2\n", host);
	assert_has(text, want);
	snprintf(want, sizeof want,
		 "# HELP ctxguard_crossings_total Launches that crossed CUDA contexts or devices, by "
		 "the action taken.\n# TYPE ctxguard_crossings_total counter\n"
		 "ctxguard_crossings_total{host=\"%s\",rank=\"2\",action=\"abort\"} 0\n", host);
	assert_has(text, want);
	snprintf(want, sizeof want, "ctxguard_crossings_total{host=\"%s\",rank=\"2\",action=\"warn\"} 2\n",
		 host);
	assert_has(text, want);
	ck_assert_ptr_null(strstr(text, "pid="));
	ck_assert_ptr_null(strstr(strstr(text, "TYPE ctxguard_crossings") + 1, "TYPE ctxguard_crossings"));
	snprintf(want, sizeof want, "%s.tmp.%d", path, (int)child);
	ck_assert_int_ne(access(want, F_OK), 0);
}
END_TEST

/* A metrics path naming a FIFO, or (as root) a character device, is left
 * as it is: the temporary file is never renamed over it. */
START_TEST(metrics_only_over_regular_files)
{
	unset_job();
	char path[160];
	snprintf(path, sizeof path, "/tmp/ctxguard-fleet-%d.node", (int)getpid());
	int root = geteuid() == 0;
	for (int dev = 0; dev <= root; dev++) {
		unlink(path);
		ck_assert_int_eq(dev ? mknod(path, S_IFCHR | 0666, makedev(1, 3)) : mkfifo(path, 0600),
				 0);
		setenv("CTXGUARD_METRICS", path, 1);
		spawn_fn(&r, two_launches);
		struct stat st;
		ck_assert_int_eq(lstat(path, &st), 0);
		ck_assert_msg(dev ? S_ISCHR(st.st_mode) : S_ISFIFO(st.st_mode), "replaced: %s",
			      r.err);
		ck_assert_msg(strstr(r.err, "is not a regular file (left as it is"), "%s", r.err);
	}
	unlink(path);
}
END_TEST

static void aborting_crossing(void)
{
	setup("abort");
	cross();
}

/* abort() runs no destructor: the summary record and the metrics are
 * written before it, so the crossing that stopped the program is counted. */
START_TEST(abort_writes_summary_and_metrics)
{
	unset_job();
	log_to(".%p.jsonl");
	char metrics[160];
	snprintf(metrics, sizeof metrics, "/tmp/ctxguard-fleet-%d.prom", (int)getpid());
	setenv("CTXGUARD_METRICS", metrics, 1);
	pid_t child = spawn_fn(&r, aborting_crossing);
	ck_assert_msg(killed_by(&r, SIGABRT), "status %#x\n%s", r.status, r.err);
	char *text = slurp(metrics);
	unlink(metrics);
	ck_assert_msg(metric(text, "ctxguard_crossings_total{", "action=\"abort\"}") == 1,
		      "want one abort crossing in\n%s", text ? text : "no metrics");
	char path[300];
	snprintf(path, sizeof path, "/tmp/ctxguard-fleet-%d.%d.jsonl", (int)getpid(), (int)child);
	char *log = slurp(path);
	unlink(path);
	char *summary = log ? record(log, "summary") : NULL;
	ck_assert_msg(summary && strstr(summary, "\"abort\":1"), "%s", log ? log : "no log");
	free(summary);
}
END_TEST

/* The crossing record in the log of process pid (log_to(".%p.jsonl")),
 * whose file is removed. */
static char *crossing_logged_by(pid_t pid)
{
	char path[300];
	snprintf(path, sizeof path, "/tmp/ctxguard-fleet-%d.%d.jsonl", (int)getpid(), (int)pid);
	char *text = slurp(path);
	unlink(path);
	return record(text, "crossing");
}

/* The child re-reads who it is: its pid, and the environment its parent
 * had when it forked. */
START_TEST(fork_child_reads_its_identity)
{
	unset_job();
	setenv("RANK", "0", 1);
	log_to(".%p.jsonl");
	setup("warn");
	cross();
	setenv("RANK", "1", 1);
	pid_t child = fork();
	if (child == 0) {
		load();
		cross();
		exit(0);
	}
	int st;
	waitpid(child, &st, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	char *rec = crossing_logged_by(child);
	assert_common(rec, child);
	assert_has(rec, ",\"rank\":\"1\",");
	free(rec);
	rec = crossing_logged_by(getpid());
	assert_common(rec, getpid());
	assert_has(rec, ",\"rank\":\"0\",");
	free(rec);
}
END_TEST

static void *cross_in_thread(void *unused)
{
	(void)unused;
	cross();
	return NULL;
}

/* A child forked while a thread of its parent waits for a device's name
 * asks for the name itself: the asker did not come along. */
START_TEST(fork_child_asks_names_its_parent_was_asking)
{
	log_to(".%p.jsonl");
	setup("warn");
	setenv("FAKE_CUDA_PCI_DELAY_MS", "400", 1);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, cross_in_thread, NULL), 0);
	usleep(100 * 1000);
	pid_t child = fork();
	if (child == 0) {
		unsetenv("FAKE_CUDA_PCI_DELAY_MS");
		load();
		cross();
		exit(0);
	}
	int st;
	waitpid(child, &st, 0);
	pthread_join(t, NULL);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	char *rec = crossing_logged_by(child);
	assert_has(rec, ",\"owner_dev\":0,\"owner_pci\":\"" PCI0 "\",\"owner_uuid\":\"" UUID0 "\",");
	free(rec);
	free(crossing_logged_by(getpid()));
}
END_TEST

/* Runs `what` in a child; returns its stderr. */
static const char *child_stderr(void (*what)(void))
{
	spawn_fn(&r, what);
	ck_assert_msg(exited(&r, 0), "status %#x\n%s", r.status, r.err);
	return r.err;
}

/* The driver in use (the shim started), but no module and no launch. */
static void driver_only(void)
{
	CUdevice dev;
	CUdeviceptr p;
	if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx[0], dev) ||
	    cuCtxSetCurrent(ctx[0]) || cuMemAlloc(&p, 4096))
		exit(21);
}


/* A process that loaded no module and launched nothing prints nothing at
 * exit; one that did says so in the right number. */
START_TEST(silent_unless_something_happened)
{
	unset_job();
	log_to(".jsonl");
	const char *err = child_stderr(driver_only);
	ck_assert_msg(!err || !*err, "a process that did nothing printed:\n%s", err);
	char *text = slurp(log_path);
	unlink(log_path);
	assert_has(text, "{\"event\":\"summary\"");
	err = child_stderr(one_launch);
	assert_has(err, "1 launch checked, 1 crossing (abort 0, error 0, warn 1, off 0, redirect 0)\n");
	unlink(log_path);
}
END_TEST

/* The command's --log (with %h and %r) and --metrics reach the program. */
START_TEST(command_log_and_metrics_flags)
{
	char prog[4096], log[160], metrics[160], host[256], path[600];
	snprintf(prog, sizeof prog, "%s/tests/progs/scenario", build_dir());
	snprintf(log, sizeof log, "/tmp/ctxguard-fleet-%d.%%h.%%r.jsonl", (int)getpid());
	snprintf(metrics, sizeof metrics, "/tmp/ctxguard-fleet-%d.%%r.prom", (int)getpid());
	const char *argv[] = {"ctxguard", "--mode", "warn", "--log", log, "--metrics", metrics,
			      "--", prog, "dlsym", "data", "launch", "cross", NULL};
	const char *env[] = {preload_without_shim(), "RANK=1", NULL};
	spawn(&r, env, argv);
	ck_assert_msg(WIFEXITED(r.status), "status %#x\n%s", r.status, r.err);
	gethostname(host, sizeof host);
	snprintf(path, sizeof path, "/tmp/ctxguard-fleet-%d.%s.1.jsonl", (int)getpid(), host);
	char *text = slurp(path);
	unlink(path);
	char *rec = record(text, "crossing");
	assert_has(rec, ",\"rank\":\"1\",");
	free(rec);
	snprintf(path, sizeof path, "/tmp/ctxguard-fleet-%d.1.prom", (int)getpid());
	text = slurp(path);
	unlink(path);
	assert_has(text, "action=\"warn\"} 1\n");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fleet");
	TCase *t = tcase_create("fleet");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, every_record_carries_the_job);
	tcase_add_test(t, no_job_no_job_keys);
	tcase_add_loop_test(t, log_path_expands, 0, 4);
	tcase_add_loop_test(t, syslog_gets_one_line_per_crossing, 0, 2);
	tcase_add_loop_test(t, syslog_gets_the_audit_records, 0,
			    4 * (int)(sizeof audit_records / sizeof audit_records[0]));
	tcase_add_test(t, metrics_file_at_exit);
	tcase_add_test(t, metrics_only_over_regular_files);
	tcase_add_test(t, syslog_drops_counted);
	tcase_add_test(t, abort_writes_summary_and_metrics);
	tcase_add_test(t, fork_child_reads_its_identity);
	tcase_add_test(t, fork_child_asks_names_its_parent_was_asking);
	tcase_add_test(t, silent_unless_something_happened);
	tcase_add_test(t, command_log_and_metrics_flags);
	suite_add_tcase(s, t);
	return run_suite(s);
}
