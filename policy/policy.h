/* ctxguard policy: which kernels are expert kernels, what to do on a
 * crossing, and the messages that say so.  Pure C11 + libc: no CUDA calls,
 * so every line of it is unit-testable on a machine without a GPU. */
#ifndef CTXGUARD_POLICY_H
#define CTXGUARD_POLICY_H

#include <stddef.h>

enum cg_action { CG_ACT_UNSET = -1, CG_ACT_OFF, CG_ACT_WARN, CG_ACT_ERROR, CG_ACT_ABORT,
		 CG_ACT_REDIRECT };
/* What redirect runs for a recognized GEMM: the bundled kernel, or the
 * kernel itself re-homed into the operands' context. */
enum cg_redirect { CG_REDIRECT_BUNDLED, CG_REDIRECT_REHOME };
enum cg_scope { CG_SCOPE_EXPERTS, CG_SCOPE_ALL };

/* The message transformers raises for this failure; abort prints it
 * verbatim as the first line, error returns it from cuGetErrorString. */
extern const char cg_deepgemm_message[];

struct cg_pattern;                 /* compiled glob, regex or hash; policy/pattern.h */

struct cg_rule {
	char *name;                /* from "[rule NAME]" */
	char *where;               /* "file:line" of the header, for diagnostics */
	struct cg_pattern *kernels; /* name patterns (mangled or demangled) */
	struct cg_pattern *modules; /* origin path patterns */
	struct cg_pattern *images;  /* image hashes, "fnv1a64:<16 hex>" */
	int action;                /* CG_ACT_UNSET: follow the policy's mode */
	char *message;             /* NULL: the generic cross-context message */
	char *fix;                 /* NULL: the generic advice for the report */
};

#define CG_POLICY_MAX_ERRORS 16

struct cg_policy {
	int mode;                  /* default action (abort) */
	int scope;                 /* experts (default) or all */
	int operands;              /* 1: check pointer/tensor-map operands too */
	int error_code;            /* CUresult returned by the error action (400) */
	int exit_code;             /* for the ctxguard command: 0 = program's own */
	int quiet;                 /* 1: no summary line on stderr at exit */
	int print_limit;           /* crossings of each kernel reported in full (8) */
	int redirect;              /* enum cg_redirect (bundled) */
	int redirect_fallback;     /* abort (default) or error: redirect impossible */
	int backstop;              /* 1: the CUPTI backstop watches for unhooked launches */
	int shadow;                /* 1: expert GEMMs also run the bundled kernel, compared */
	int defaults;              /* 1: built-in rules kept after the file's */
	char *log_path;            /* JSON-lines log (%p pid, %h host, %r rank), or
				    * "syslog[:SOCKET]"; NULL: none */
	char *metrics_path;        /* Prometheus text file written at exit; NULL: none */
	char *cupti_path;          /* the libcupti the backstop loads; NULL: it looks */
	int log_mode;              /* permission bits of a log file ctxguard creates (0600) */
	int lock;                  /* 1: the system policy is a floor (policy/lock.c) */
	int secure;                /* 1: secure execution, CTXGUARD_* ignored */
	int out_of_memory;         /* 1: loading lost a line or a rule to it */
	char *source;              /* where the policy came from, for the log */
	size_t nrules;
	struct cg_rule *rules;
	size_t nerrors;            /* configuration problems, one line each */
	char *errors[CG_POLICY_MAX_ERRORS];
	size_t errors_dropped;     /* problems beyond CG_POLICY_MAX_ERRORS */
	size_t nrefused;           /* loosenings the lock refused, one line each */
	char *refused[CG_POLICY_MAX_ERRORS];
};

/* The system policy file: SYSCONFDIR/ctxguard/policy.conf, chosen at build
 * time (make SYSCONFDIR=...; default /etc). */
extern const char cg_system_policy[];

/* The default policy text (policy/default.conf, embedded by builtin.c). */
extern const char cg_default_conf[];

/* Default settings, no rules, no errors.  p need not be initialised. */
void cg_policy_init(struct cg_policy *p);

/* Build the policy: defaults, then the file named by CTXGUARD_POLICY (else
 * the system policy when it exists), then the CTXGUARD_* variables of envp.
 * A bad file or value never fails: it records one precise line in
 * p->errors and keeps the safe default for that setting.  A system policy
 * with "lock = on" is a floor instead: the user's file and variables may
 * only add rules and tighten (p->refused lists what they could not do).  In
 * secure execution (AT_SECURE: setuid, setgid, file capabilities) envp is
 * not read at all and p->secure is set. */
void cg_policy_load(struct cg_policy *p, char *const *envp);

/* The same, with etc_path in place of the system policy (tests;
 * NULL: no such file).  CTXGUARD_POLICY=none means no file either. */
void cg_policy_load_from(struct cg_policy *p, char *const *envp,
			 const char *etc_path);

/* Parse policy text (file syntax, see policy/default.conf) into p: its
 * settings apply over p's, its rules are appended.  origin names the text
 * in error lines.  Returns the number of errors it added. */
int cg_policy_parse(struct cg_policy *p, const char *text, const char *origin);

void cg_policy_free(struct cg_policy *p);

/* NULL when value is one the setting key (as in the file: "mode") takes,
 * else what it expects ("abort|error|warn|off|redirect"): the command
 * checks its flags with the policy's own parsers. */
const char *cg_setting_refuses(const char *key, const char *value);

/* Under a lock, record one refused loosening that is not a policy setting
 * (e.g. asked "CTXGUARD_LIBCUDA=x"; instead: what happens instead). */
void cg_policy_refuse(struct cg_policy *p, const char *asked,
		      const char *instead);

/* Index of the first rule matching the kernel, or -1.  Any argument may be
 * NULL.  Called once per function at registration, never per launch. */
int cg_policy_match(const struct cg_policy *p, const char *mangled,
		    const char *demangled, const char *origin_path,
		    const char *image_hash);

/* Whether any rule matches by image hash: hashing a large fatbin at every
 * load costs milliseconds, so images are hashed only then. */
int cg_policy_uses_images(const struct cg_policy *p);

/* Whether any crossing can lead to redirect: the mode, or a rule's action. */
int cg_policy_redirects(const struct cg_policy *p);

/* What a crossing by a kernel matching `rule` (-1: none) leads to. */
int cg_policy_action(const struct cg_policy *p, int rule);

const char *cg_action_name(int action);
int cg_action_parse(const char *s);     /* -1 when s is not an action */

/* CUDA error names for error_code; a small table of the plausible ones,
 * so that policy needs no CUDA header.  name: NULL when not in the table;
 * parse: a name (CUDA_ERROR_ prefix optional) or a number 1..999, else -1. */
const char *cg_cuda_error_name(int code);
int cg_cuda_error_parse(const char *s);

/* "fnv1a64:" + 16 lowercase hex digits of data: how the shim names an
 * in-memory module image, and what "image =" lines match. */
void cg_fnv1a64_hex(const void *data, size_t len, char out[25]);

/* An operand of a launch that lives on another device. */
struct cg_operand {
	int param;                 /* parameter index */
	int dev;                   /* device holding it, -1 unknown */
	unsigned long long addr;
	const char *shape;         /* "pointer" (NULL) or a tensor map's shape */
	const char *uuid;          /* dev's UUID, NULL: unknown */
};

/* A redirect whose work was queued but could not be ordered after it: the
 * ordering call that failed (and on which stream) with its error, then the
 * host's wait for the work (cuEventSynchronize or cuStreamSynchronize)
 * with its result. */
struct cg_host_wait {
	const char *failed;        /* NULL: the work was ordered, no wait */
	int error;
	const char *call;
	int result;
};

/* The two kinds of crossing; the values are the letters the log writes. */
enum cg_crossing_kind {
	CG_KIND_OWNER = 'a',       /* the function belongs to another context */
	CG_KIND_OPERAND = 'b',     /* an operand lives on another device */
};

/* A crossing, as the shim saw it; formatting is pure. */
struct cg_crossing {
	enum cg_crossing_kind kind;
	const char *api;           /* entry point, e.g. "cuLaunchKernelEx" */
	const char *kernel;        /* mangled name, or "<unknown>" */
	const char *demangled;     /* may be NULL */
	const char *origin;        /* module file or image hash, may be NULL */
	const char *load_api;      /* how the function was obtained */
	const void *function;
	const void *owner_ctx;
	int owner_dev;             /* -1 unknown */
	const void *launch_ctx;
	int launch_dev;
	const void *stream;
	int rule;                  /* -1: none (scope all) */
	int action;
	long pid, tid;
	/* The devices as a fleet names them (PCI bus id, UUID); NULL: unknown. */
	const char *owner_pci, *owner_uuid, *launch_pci, *launch_uuid;
	/* kind 'b': every operand of the launch on another device */
	const struct cg_operand *operands;
	size_t noperands;
	/* action redirect */
	int redirect_dev;          /* where the work ran */
	const char *redirect_via;  /* bundled entry point, or "re-homed" */
	struct cg_host_wait host_wait;
	/* seen by the CUPTI backstop: the launch bypassed the hooks, and
	 * `asked` is the policy's action (one that refuses became abort) */
	int unhooked;
	int asked;
};

/* The report abort/warn print on stderr: the rule's message (the
 * documented DeepGEMM line for the default rule) as the first line, then
 * "ctxguard: " diagnostic lines naming kernel, contexts, devices, rule,
 * pid/tid and what to do (the rule's fix, else generic advice).  Every
 * line ends in '\n'.  Returns the full length, like snprintf: buf may be
 * NULL with n 0, and a short buf holds a NUL-terminated prefix. */
size_t cg_format_report(char *buf, size_t n, const struct cg_policy *p,
			const struct cg_crossing *c);

/* One JSON object (no newline) describing the crossing, for the log;
 * NULL strings become null, pointers "0x..." strings.  Like snprintf.
 * Starts with "event"; the log writer adds time, host, pid, tid and job. */
size_t cg_format_json(char *buf, size_t n, const struct cg_policy *p,
		      const struct cg_crossing *c);

/* The first line of the report: the rule's message or the generic one. */
const char *cg_crossing_message(const struct cg_policy *p, int rule);

/* JSON string escaping into buf (no quotes added); returns the full
 * length, like snprintf, but a short buf holds only the escapes and UTF-8
 * sequences that fit whole, so that it can always be quoted as a JSON
 * string. */
size_t cg_json_escape(char *buf, size_t n, const char *s);
/* The same escapes for a terminal (stderr): control bytes, C1 codes and
 * bytes that are not UTF-8 escaped, quotes and backslashes left as they
 * are; lines: newlines kept (a report of several lines), else escaped (a
 * one-line message). */
size_t cg_text_escape(char *buf, size_t n, const char *s, int lines);

#endif
