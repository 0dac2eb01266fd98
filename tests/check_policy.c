/* Unit tests of policy/: settings, sources, error lines, rule matching,
 * actions, messages, the report and the JSON log line. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../policy/policy.h"
#include "tmpdir.h"

#define ORIGIN "t.conf"

/* ---- helpers ---------------------------------------------------------- */

/* Writes len bytes to tmpdir/name; returns the path (static storage). */
static const char *write_file(const char *name, const void *data, size_t len)
{
	static char path[4][128];
	static int slot;
	char *p = path[slot++ % 4];
	snprintf(p, 128, "%s/%s", tmpdir, name);
	FILE *f = fopen(p, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	fclose(f);
	return p;
}

static const char *write_text(const char *name, const char *text)
{
	return write_file(name, text, strlen(text));
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = malloc(1 << 20);
	ck_assert_ptr_nonnull(buf);
	*len = fread(buf, 1, (1 << 20) - 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

/* Settings equal to cg_policy_init's. */
static void assert_default_settings(const struct cg_policy *p)
{
	ck_assert_int_eq(p->mode, CG_ACT_ABORT);
	ck_assert_int_eq(p->scope, CG_SCOPE_EXPERTS);
	ck_assert_int_eq(p->operands, 1);
	ck_assert_int_eq(p->error_code, 400);
	ck_assert_int_eq(p->exit_code, 0);
	ck_assert_int_eq(p->quiet, 0);
	ck_assert_int_eq(p->defaults, 1);
	ck_assert_int_eq(p->redirect, CG_REDIRECT_BUNDLED);
	ck_assert_int_eq(p->redirect_fallback, CG_ACT_ABORT);
	ck_assert_ptr_null(p->log_path);
	ck_assert_ptr_null(p->metrics_path);
	ck_assert_int_eq(p->log_mode, 0600);
	ck_assert_int_eq(p->lock, 0);
}

static int rule_index(const struct cg_policy *p, const char *name)
{
	for (size_t i = 0; i < p->nrules; i++)
		if (strcmp(p->rules[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* ---- defaults --------------------------------------------------------- */

START_TEST(test_init_defaults)
{
	struct cg_policy p;
	memset(&p, 0x5a, sizeof p);   /* init must not rely on zeroed memory */
	cg_policy_init(&p);
	assert_default_settings(&p);
	ck_assert_uint_eq(p.nrules, 0);
	ck_assert_uint_eq(p.nerrors, 0);
	ck_assert_uint_eq(p.errors_dropped, 0);
	cg_policy_free(&p);
	cg_policy_free(&p);           /* free leaves a freeable policy */
	cg_policy_free(NULL);
}
END_TEST

START_TEST(test_load_defaults)
{
	char *env[] = { "HOME=/root", NULL };
	struct cg_policy p;

	cg_policy_load_from(&p, env, "/nonexistent/ctxguard/policy.conf");
	assert_default_settings(&p);
	ck_assert_uint_eq(p.nerrors, 0);
	ck_assert_str_eq(p.source, "built-in");
	ck_assert_uint_eq(p.nrules, 1);
	ck_assert_str_eq(p.rules[0].name, "deepgemm");
	ck_assert_int_eq(p.rules[0].action, CG_ACT_UNSET);
	ck_assert(strncmp(p.rules[0].where, "built-in:", 9) == 0);
	cg_policy_free(&p);

	cg_policy_load_from(&p, NULL, NULL);
	assert_default_settings(&p);
	ck_assert_uint_eq(p.nrules, 1);
	cg_policy_free(&p);
}
END_TEST

/* default.conf must spell out exactly the defaults compiled in. */
START_TEST(test_default_conf_matches_code)
{
	struct cg_policy p;

	cg_policy_init(&p);
	p.mode = CG_ACT_OFF;
	p.scope = CG_SCOPE_ALL;
	p.operands = 0;
	p.error_code = 1;
	p.exit_code = 9;
	p.quiet = 1;
	p.defaults = 0;
	p.log_mode = 0777;
	p.lock = 1;
	p.log_path = strdup("/tmp/x");
	ck_assert_int_eq(cg_policy_parse(&p, cg_default_conf, "built-in"), 0);
	assert_default_settings(&p);
	ck_assert_uint_eq(p.nrules, 1);
	cg_policy_free(&p);
}
END_TEST

START_TEST(test_embedded_equals_disk)
{
	/* The source file's directory locates the repository, whatever the
	 * working directory of the test run. */
	char path[1024];
	const char *slash = strrchr(__FILE__, '/');
	if (slash)
		snprintf(path, sizeof path, "%.*s/../policy/default.conf",
			 (int)(slash - __FILE__), __FILE__);
	else
		snprintf(path, sizeof path, "../policy/default.conf");
	size_t len;
	char *disk = slurp(path, &len);
	if (!disk)
		disk = slurp("policy/default.conf", &len);
	ck_assert_msg(disk != NULL, "policy/default.conf not found");
	ck_assert_uint_eq(strlen(cg_default_conf), len);
	ck_assert(memcmp(cg_default_conf, disk, len) == 0);
	free(disk);
}
END_TEST

START_TEST(test_action_names)
{
	static const char *const names[] = {"off", "warn", "error", "abort"};
	for (int a = CG_ACT_OFF; a <= CG_ACT_ABORT; a++) {
		ck_assert_str_eq(cg_action_name(a), names[a]);
		ck_assert_int_eq(cg_action_parse(names[a]), a);
	}
	ck_assert_int_eq(cg_action_parse("WARN"), CG_ACT_WARN);
	ck_assert_int_eq(cg_action_parse("explode"), -1);
	ck_assert_int_eq(cg_action_parse(""), -1);
	ck_assert_int_eq(cg_action_parse(NULL), -1);
	ck_assert_str_eq(cg_action_name(CG_ACT_UNSET), "unset");
	ck_assert_str_eq(cg_action_name(42), "invalid");
}
END_TEST

START_TEST(test_cuda_error_names)
{
	ck_assert_str_eq(cg_cuda_error_name(400), "CUDA_ERROR_INVALID_HANDLE");
	ck_assert_str_eq(cg_cuda_error_name(201), "CUDA_ERROR_INVALID_CONTEXT");
	ck_assert_ptr_null(cg_cuda_error_name(0));
	ck_assert_ptr_null(cg_cuda_error_name(12345));
	ck_assert_int_eq(cg_cuda_error_parse("CUDA_ERROR_INVALID_CONTEXT"), 201);
	ck_assert_int_eq(cg_cuda_error_parse("invalid_handle"), 400);
	ck_assert_int_eq(cg_cuda_error_parse("cuda_error_illegal_address"), 700);
	ck_assert_int_eq(cg_cuda_error_parse("709"), 709);
	ck_assert_int_eq(cg_cuda_error_parse("1"), 1);
	ck_assert_int_eq(cg_cuda_error_parse("0"), -1);
	ck_assert_int_eq(cg_cuda_error_parse("1000"), -1);
	ck_assert_int_eq(cg_cuda_error_parse("40x"), -1);
	ck_assert_int_eq(cg_cuda_error_parse("-400"), -1);
	ck_assert_int_eq(cg_cuda_error_parse("CUDA_ERROR_"), -1);
	ck_assert_int_eq(cg_cuda_error_parse(""), -1);
	ck_assert_int_eq(cg_cuda_error_parse(NULL), -1);
}
END_TEST

/* ---- every key -------------------------------------------------------- */

START_TEST(test_every_key)
{
	struct cg_policy p;

	cg_policy_init(&p);
	ck_assert_int_eq(cg_policy_parse(&p,
		"# a comment line\n"
		"   # an indented one\n"
		"\n"
		"mode = warn   # trailing comment\n"
		"scope=all\n"
		"operands = off\n"
		"error_code = CUDA_ERROR_INVALID_CONTEXT\n"
		"exit_code = 17\n"
		"quiet = yes\n"
		"log = /var/log/ctx-%p.jsonl\n"
		"metrics = /var/lib/textfile/ctx-%h.prom\n"
		"defaults = false\r\n"
		"[rule mine]\n"
		"kernel = my_kernel#1\n"
		"module = */lib/*.cubin\n"
		"image = fnv1a64:0123456789abcdef\n"
		"action = error\n"
		"message = Something = went wrong\n"
		"fix = do the right thing\n", ORIGIN), 0);
	ck_assert_int_eq(p.mode, CG_ACT_WARN);
	ck_assert_int_eq(p.scope, CG_SCOPE_ALL);
	ck_assert_int_eq(p.operands, 0);
	ck_assert_int_eq(p.error_code, 201);
	ck_assert_int_eq(p.exit_code, 17);
	ck_assert_int_eq(p.quiet, 1);
	ck_assert_str_eq(p.log_path, "/var/log/ctx-%p.jsonl");
	ck_assert_str_eq(p.metrics_path, "/var/lib/textfile/ctx-%h.prom");
	ck_assert_int_eq(p.defaults, 0);
	ck_assert_uint_eq(p.nrules, 1);

	const struct cg_rule *r = &p.rules[0];
	ck_assert_str_eq(r->name, "mine");
	ck_assert_str_eq(r->where, ORIGIN ":13");
	ck_assert_int_eq(r->action, CG_ACT_ERROR);
	ck_assert_str_eq(r->message, "Something = went wrong");
	ck_assert_str_eq(r->fix, "do the right thing");
	/* "#" not after white space belongs to the value */
	ck_assert_int_eq(cg_policy_match(&p, "my_kernel#1", NULL, NULL, NULL), 0);
	ck_assert_int_eq(cg_policy_match(&p, NULL, NULL, "/x/lib/k.cubin", NULL), 0);
	ck_assert_int_eq(cg_policy_match(&p, NULL, NULL, NULL,
					 "fnv1a64:0123456789abcdef"), 0);
	cg_policy_free(&p);
}
END_TEST

START_TEST(test_value_forms)
{
	struct cg_policy p;

	cg_policy_init(&p);
	ck_assert_int_eq(cg_policy_parse(&p,
		"MODE = Error\nscope = EXPERTS\noperands = 1\nquiet = on\n"
		"error_code = 719\nexit_code = 0\nlog = /a\nlog = none\n"
		"Defaults = On\n", ORIGIN), 0);
	ck_assert_int_eq(p.mode, CG_ACT_ERROR);
	ck_assert_int_eq(p.scope, CG_SCOPE_EXPERTS);
	ck_assert_int_eq(p.operands, 1);
	ck_assert_int_eq(p.quiet, 1);
	ck_assert_int_eq(p.error_code, 719);
	ck_assert_int_eq(p.exit_code, 0);
	ck_assert_ptr_null(p.log_path);
	ck_assert_int_eq(p.defaults, 1);
	/* the last of repeated settings wins */
	ck_assert_int_eq(cg_policy_parse(&p, "mode = off\nmode = warn\n"
					 "quiet = no\noperands = true\n", ORIGIN), 0);
	ck_assert_int_eq(p.mode, CG_ACT_WARN);
	ck_assert_int_eq(p.quiet, 0);
	cg_policy_parse(&p, "", ORIGIN);
	cg_policy_parse(&p, NULL, NULL);
	ck_assert_uint_eq(p.nerrors, 0);
	cg_policy_free(&p);
}
END_TEST

/* ---- environment ------------------------------------------------------ */

START_TEST(test_env_good)
{
	char *env[] = {
		"CTXGUARD_POLICY=none", "CTXGUARD_MODE=warn",
		"CTXGUARD_SCOPE=all", "CTXGUARD_OPERANDS=off",
		"CTXGUARD_ERROR_CODE=CUDA_ERROR_INVALID_CONTEXT",
		"CTXGUARD_EXIT_CODE=3", "CTXGUARD_QUIET=1",
		"CTXGUARD_LOG=syslog", "CTXGUARD_METRICS=/tmp/ctxguard-%r.prom",
		"CTXGUARD_MODEX=error",       /* not a prefix match */
		"XCTXGUARD_SCOPE=experts", NULL,
	};
	struct cg_policy p;

	cg_policy_load_from(&p, env, NULL);
	ck_assert_uint_eq(p.nerrors, 0);
	ck_assert_int_eq(p.mode, CG_ACT_WARN);
	ck_assert_int_eq(p.scope, CG_SCOPE_ALL);
	ck_assert_int_eq(p.operands, 0);
	ck_assert_int_eq(p.error_code, 201);
	ck_assert_int_eq(p.exit_code, 3);
	ck_assert_int_eq(p.quiet, 1);
	ck_assert_str_eq(p.log_path, "syslog");
	ck_assert_str_eq(p.metrics_path, "/tmp/ctxguard-%r.prom");
	ck_assert_str_eq(p.source, "built-in");
	cg_policy_free(&p);

	/* an empty variable counts as unset */
	char *empty[] = { "CTXGUARD_MODE=", "CTXGUARD_LOG=", "CTXGUARD_POLICY=",
			  NULL };
	cg_policy_load_from(&p, empty, NULL);
	ck_assert_uint_eq(p.nerrors, 0);
	assert_default_settings(&p);
	cg_policy_free(&p);

	char *none[] = { "CTXGUARD_LOG=none", NULL };
	cg_policy_load_from(&p, none, NULL);
	ck_assert_ptr_null(p.log_path);
	cg_policy_free(&p);
}
END_TEST

static const struct {
	const char *var;
	const char *line;
} bad_env[] = {
	{"CTXGUARD_MODE=xyz",
	 "ctxguard: CTXGUARD_MODE=xyz: expected abort|error|warn|off|redirect (using abort)"},
	{"CTXGUARD_SCOPE=some",
	 "ctxguard: CTXGUARD_SCOPE=some: expected experts|all (using experts)"},
	{"CTXGUARD_OPERANDS=maybe",
	 "ctxguard: CTXGUARD_OPERANDS=maybe: expected on|off (using on)"},
	{"CTXGUARD_ERROR_CODE=CUDA_ERROR_BOGUS",
	 "ctxguard: CTXGUARD_ERROR_CODE=CUDA_ERROR_BOGUS: expected a CUDA error"
	 " name such as CUDA_ERROR_INVALID_HANDLE or a number 1-999 (using"
	 " CUDA_ERROR_INVALID_HANDLE)"},
	{"CTXGUARD_ERROR_CODE=0",
	 "ctxguard: CTXGUARD_ERROR_CODE=0: expected a CUDA error name such as"
	 " CUDA_ERROR_INVALID_HANDLE or a number 1-999 (using"
	 " CUDA_ERROR_INVALID_HANDLE)"},
	{"CTXGUARD_EXIT_CODE=256",
	 "ctxguard: CTXGUARD_EXIT_CODE=256: expected a number 0-255 (using 0)"},
	{"CTXGUARD_EXIT_CODE= 1",
	 "ctxguard: CTXGUARD_EXIT_CODE= 1: expected a number 0-255 (using 0)"},
	{"CTXGUARD_QUIET=2",
	 "ctxguard: CTXGUARD_QUIET=2: expected on|off (using off)"},
	{"CTXGUARD_REDIRECT=elsewhere",
	 "ctxguard: CTXGUARD_REDIRECT=elsewhere: expected bundled|rehome (using bundled)"},
	{"CTXGUARD_REDIRECT_FALLBACK=warn",
	 "ctxguard: CTXGUARD_REDIRECT_FALLBACK=warn: expected abort|error (using abort)"},
	{"CTXGUARD_REDIRECT_FALLBACK=redirect",
	 "ctxguard: CTXGUARD_REDIRECT_FALLBACK=redirect: expected abort|error (using abort)"},
	{"CTXGUARD_MODE=a\033[2Jb",
	 "ctxguard: CTXGUARD_MODE=a?[2Jb: expected abort|error|warn|off|redirect (using"
	 " abort)"},
};

/* Redirect: a mode, a rule action, and its two settings from file and
 * environment; the built-in DeepGEMM rule keeps abort unless told. */
START_TEST(test_redirect_settings)
{
	char *env[] = { "CTXGUARD_POLICY=none", "CTXGUARD_MODE=redirect",
			"CTXGUARD_REDIRECT=rehome", "CTXGUARD_REDIRECT_FALLBACK=error", NULL };
	struct cg_policy p;
	cg_policy_load_from(&p, env, NULL);
	ck_assert_uint_eq(p.nerrors, 0);
	ck_assert_int_eq(p.mode, CG_ACT_REDIRECT);
	ck_assert_int_eq(p.redirect, CG_REDIRECT_REHOME);
	ck_assert_int_eq(p.redirect_fallback, CG_ACT_ERROR);
	ck_assert_str_eq(cg_action_name(CG_ACT_REDIRECT), "redirect");
	cg_policy_free(&p);

	cg_policy_init(&p);
	ck_assert_int_eq(cg_policy_parse(&p, "redirect = Bundled\nredirect_fallback = abort\n"
					 "[rule r]\nkernel = k*\naction = redirect\n", "t.conf"), 0);
	ck_assert_int_eq(p.redirect, CG_REDIRECT_BUNDLED);
	ck_assert_int_eq(p.redirect_fallback, CG_ACT_ABORT);
	ck_assert_int_eq(cg_policy_action(&p, 0), CG_ACT_REDIRECT);
	cg_policy_free(&p);

	/* The built-in rule follows the global mode: abort by default. */
	char *none[] = { "CTXGUARD_POLICY=none", NULL };
	cg_policy_load_from(&p, none, NULL);
	int r = cg_policy_match(&p, NULL, "void deep_gemm::sm90_bf16_gemm_impl<0u>(int*)", NULL,
				NULL);
	ck_assert_int_ge(r, 0);
	ck_assert_int_eq(cg_policy_action(&p, r), CG_ACT_ABORT);
	cg_policy_free(&p);
}
END_TEST

START_TEST(test_env_bad)
{
	char *env[] = { "CTXGUARD_POLICY=none", (char *)bad_env[_i].var, NULL };
	struct cg_policy p;

	cg_policy_load_from(&p, env, NULL);
	ck_assert_uint_eq(p.nerrors, 1);
	ck_assert_str_eq(p.errors[0], bad_env[_i].line);
	assert_default_settings(&p);
	ck_assert_uint_eq(p.nrules, 1);
	cg_policy_free(&p);
}
END_TEST

START_TEST(test_env_overrides_file)
{
	tmpdir_make("check_policy");
	const char *path = write_text("p.conf",
		"mode = warn\nscope = all\nquiet = on\n"
		"[rule own]\nkernel = own_*\n");
	char var[256];
	snprintf(var, sizeof var, "CTXGUARD_POLICY=%s", path);
	char *env[] = { var, "CTXGUARD_MODE=error", "CTXGUARD_QUIET=bad", NULL };
	struct cg_policy p;

	cg_policy_load_from(&p, env, NULL);
	ck_assert_int_eq(p.mode, CG_ACT_ERROR);
	ck_assert_int_eq(p.scope, CG_SCOPE_ALL);
	ck_assert_int_eq(p.quiet, 1);   /* the file's value survives */
	ck_assert_uint_eq(p.nerrors, 1);
	ck_assert_str_eq(p.errors[0],
			 "ctxguard: CTXGUARD_QUIET=bad: expected on|off (using on)");
	ck_assert_str_eq(p.source, path);
	ck_assert_uint_eq(p.nrules, 2);
	ck_assert_str_eq(p.rules[0].name, "own");
	ck_assert_str_eq(p.rules[1].name, "deepgemm");
	cg_policy_free(&p);
	tmpdir_remove();
}
END_TEST

START_TEST(test_etc_file)
{
	tmpdir_make("check_policy");
	const char *etc = write_text("etc.conf", "mode = warn\n");
	char *env[] = { "PATH=/bin", NULL };
	struct cg_policy p;

	cg_policy_load_from(&p, env, etc);
	ck_assert_int_eq(p.mode, CG_ACT_WARN);
	ck_assert_str_eq(p.source, etc);
	ck_assert_uint_eq(p.nerrors, 0);
	cg_policy_free(&p);

	/* CTXGUARD_POLICY wins over the /etc file, "none" skips both */
	char *none[] = { "CTXGUARD_POLICY=none", NULL };
	cg_policy_load_from(&p, none, etc);
	ck_assert_int_eq(p.mode, CG_ACT_ABORT);
	ck_assert_str_eq(p.source, "built-in");
	cg_policy_free(&p);

	const char *own = write_text("own.conf", "mode = off\n");
	char var[256];
	snprintf(var, sizeof var, "CTXGUARD_POLICY=%s", own);
	char *env2[] = { var, NULL };
	cg_policy_load_from(&p, env2, etc);
	ck_assert_int_eq(p.mode, CG_ACT_OFF);
	cg_policy_free(&p);

	/* the real entry point, kept off this machine's /etc */
	cg_policy_load(&p, none);
	assert_default_settings(&p);
	ck_assert_uint_eq(p.nerrors, 0);
	cg_policy_free(&p);
	tmpdir_remove();
}
END_TEST

/* ---- file problems ---------------------------------------------------- */

#define EXPECTED_ERROR_CODE "expected a CUDA error name such as" \
	" CUDA_ERROR_INVALID_HANDLE or a number 1-999"

static const struct {
	const char *text;
	const char *line;          /* the one error line, or its start */
	const char *suffix;        /* NULL: line is exact */
	size_t nrules;
} bad_files[] = {
	{"quiet = off\nbogus = 1\n",
	 "ctxguard: t.conf:2: unknown key 'bogus' (line ignored)", NULL, 0},
	{"\n\nmode = xyz\n",
	 "ctxguard: t.conf:3: mode = xyz: expected abort|error|warn|off|redirect (using"
	 " abort)", NULL, 0},
	{"scope = some",
	 "ctxguard: t.conf:1: scope = some: expected experts|all (using"
	 " experts)", NULL, 0},
	{"operands = maybe\n",
	 "ctxguard: t.conf:1: operands = maybe: expected on|off (using on)",
	 NULL, 0},
	{"error_code = CUDA_ERROR_BOGUS\n",
	 "ctxguard: t.conf:1: error_code = CUDA_ERROR_BOGUS: "
	 EXPECTED_ERROR_CODE " (using CUDA_ERROR_INVALID_HANDLE)", NULL, 0},
	{"error_code = 0\n",
	 "ctxguard: t.conf:1: error_code = 0: " EXPECTED_ERROR_CODE
	 " (using CUDA_ERROR_INVALID_HANDLE)", NULL, 0},
	{"exit_code = 256\n",
	 "ctxguard: t.conf:1: exit_code = 256: expected a number 0-255 (using"
	 " 0)", NULL, 0},
	{"exit_code = -1\n",
	 "ctxguard: t.conf:1: exit_code = -1: expected a number 0-255 (using"
	 " 0)", NULL, 0},
	{"quiet = 2\n",
	 "ctxguard: t.conf:1: quiet = 2: expected on|off (using off)", NULL, 0},
	{"log =\n",
	 "ctxguard: t.conf:1: log = : expected a file path or none (using"
	 " none)", NULL, 0},
	{"defaults = nope\n",
	 "ctxguard: t.conf:1: defaults = nope: expected on|off (using on)",
	 NULL, 0},
	{"kernel = foo*\n",
	 "ctxguard: t.conf:1: 'kernel' outside a [rule] section (line"
	 " ignored)", NULL, 0},
	{"[rule r]\nkernel = a\nmode = warn\n",
	 "ctxguard: t.conf:3: 'mode' is a global setting and belongs before"
	 " the first [rule] (line ignored)", NULL, 1},
	{"[rule r]\nkernel = a\ncolour = red\n",
	 "ctxguard: t.conf:3: unknown key 'colour' in [rule r] (line ignored)",
	 NULL, 1},
	{"[rule empty]\naction = warn\nmessage = hi\n",
	 "ctxguard: t.conf:1: [rule empty] has no kernel, module or image line"
	 " (rule ignored)", NULL, 0},
	{"[rule r\nkernel = a\n",
	 "ctxguard: t.conf:1: unterminated section header '[rule r' (section"
	 " ignored)", NULL, 0},
	{"quiet = off\n[bogus]\nkernel = a\nnonsense\n",
	 "ctxguard: t.conf:2: unknown section [bogus], expected [rule NAME]"
	 " (section ignored)", NULL, 0},
	{"[rule]\nkernel = a\n",
	 "ctxguard: t.conf:1: [rule] without a name (section ignored)", NULL, 0},
	{"[rule a b]\nkernel = a\n",
	 "ctxguard: t.conf:1: rule name 'a b' may hold only letters, digits,"
	 " '_', '-' and '.' (section ignored)", NULL, 0},
	{"[rule r] x\nkernel = a\n",
	 "ctxguard: t.conf:1: unexpected text after ']': ' x' (section"
	 " ignored)", NULL, 0},
	{"quiet = off\njust words\n",
	 "ctxguard: t.conf:2: expected 'key = value' or '[rule NAME]', got"
	 " 'just words' (line ignored)", NULL, 0},
	{"quiet = off\n = value\n",
	 "ctxguard: t.conf:2: no key before '=' (line ignored)", NULL, 0},
	{"[rule r]\nkernel = a\nkernel = re:(\n",
	 "ctxguard: t.conf:3: kernel = re:(: bad regular expression: ",
	 " (pattern ignored)", 1},
	{"[rule r]\nkernel = a\nkernel = re:\n",
	 "ctxguard: t.conf:3: kernel = re:: empty regular expression (pattern"
	 " ignored)", NULL, 1},
	{"[rule r]\nkernel = a\nimage = fnv1a64:xyz\n",
	 "ctxguard: t.conf:3: image = fnv1a64:xyz: expected fnv1a64:<16 hex"
	 " digits> (pattern ignored)", NULL, 1},
	{"[rule r]\nkernel = a\nimage = fnv1a64:0123456789abcdef0\n",
	 "ctxguard: t.conf:3: image = fnv1a64:0123456789abcdef0: expected"
	 " fnv1a64:<16 hex digits> (pattern ignored)", NULL, 1},
	{"[rule r]\nkernel = a\nmodule =\n",
	 "ctxguard: t.conf:3: module = : empty pattern (pattern ignored)",
	 NULL, 1},
	{"[rule r]\nkernel = a\naction = explode\n",
	 "ctxguard: t.conf:3: action = explode: expected abort|error|warn|off|redirect"
	 " (using the global mode)", NULL, 1},
	{"[rule r]\nkernel = a\naction = warn\naction = explode\n",
	 "ctxguard: t.conf:4: action = explode: expected abort|error|warn|off|redirect"
	 " (using warn)", NULL, 1},
	{"[rule r]\nkernel = a\nmessage =\n",
	 "ctxguard: t.conf:3: message = : expected some text (using the"
	 " generic message)", NULL, 1},
	{"[rule r]\nkernel = a\nfix =   # only a comment\n",
	 "ctxguard: t.conf:3: fix = : expected some text (using the generic"
	 " advice)", NULL, 1},
	/* every pattern bad: the rule matches nothing and goes, silently */
	{"[rule r]\nimage = 123\n",
	 "ctxguard: t.conf:2: image = 123: expected fnv1a64:<16 hex digits>"
	 " (pattern ignored)", NULL, 0},
	{"mode = \001\002\n",
	 "ctxguard: t.conf:1: mode = ??: expected abort|error|warn|off|redirect (using"
	 " abort)", NULL, 0},
};

START_TEST(test_file_error)
{
	struct cg_policy p;

	cg_policy_init(&p);
	ck_assert_int_eq(cg_policy_parse(&p, bad_files[_i].text, ORIGIN), 1);
	ck_assert_uint_eq(p.nerrors, 1);
	const char *want = bad_files[_i].line, *suffix = bad_files[_i].suffix;
	if (!suffix) {
		ck_assert_str_eq(p.errors[0], want);
	} else {
		size_t len = strlen(p.errors[0]);
		ck_assert_msg(strncmp(p.errors[0], want, strlen(want)) == 0 &&
			      len > strlen(suffix) &&
			      strcmp(p.errors[0] + len - strlen(suffix), suffix) == 0,
			      "got: %s", p.errors[0]);
	}
	assert_default_settings(&p);
	ck_assert_uint_eq(p.nrules, bad_files[_i].nrules);
	if (p.nrules)   /* the rule keeps its good pattern */
		ck_assert_int_eq(cg_policy_match(&p, "a", NULL, NULL, NULL), 0);
	cg_policy_free(&p);
}
END_TEST

/* Patterns that would make regcomp huge are refused with one line; the
 * issue's case, "re:du" and 535 "+", made glibc allocate over 1.3 GB. */
START_TEST(test_regex_bound)
{
	static const struct {
		const char *re;
		const char *why;       /* NULL: accepted */
	} cases[] = {
		{"du++", "a repetition right after another at byte 4"},
		{"(a+)+(b+)+(c+)+(d+)+(e+)+(f+)+(g+)", "multiply to more than 4096"},
		{"a{5000}", "multiply to more than 4096"},
		{"(x{64}){64}y{2}", "multiply to more than 4096"},
		{"(a)\\1", "back-reference"},
		{"^fused_(add|mul)_[0-9]+$", NULL},
		{"[+*?]{2}x[]+]+", NULL},
		{"a{2,4}b{3,}c?d*", NULL},
		{"[[:alpha:]_]+::[^]+]*", NULL},
		{"\\++", NULL},
		/* glibc reads "{,n}" as "{0,n}": 30 x 30 x 30 copies, 435 MB */
		{"((((du){,30}){,30}){,30})", "multiply to more than 4096"},
		{"a{,5000}", "multiply to more than 4096"},
		{"a{,3}+", "a repetition right after another at byte 6"},
		{"a{99999999999999999999999}", "multiply to more than 4096"},
		{"a{,3}b{,}c", NULL},
	};
	char text[1024], line[1200];
	struct cg_policy p;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(text, sizeof text, "[rule r]\nkernel = keep\nkernel = re:%s\n",
			 cases[i].re);
		cg_policy_init(&p);
		cg_policy_parse(&p, text, ORIGIN);
		ck_assert_uint_eq(p.nrules, 1);
		if (!cases[i].why) {
			ck_assert_msg(p.nerrors == 0, "%s: %s", cases[i].re, p.errors[0]);
		} else {
			ck_assert_uint_eq(p.nerrors, 1);
			ck_assert_msg(strstr(p.errors[0], cases[i].why) &&
				      strstr(p.errors[0], "(pattern ignored)") &&
				      !strchr(p.errors[0], '\n'), "%s: %s", cases[i].re,
				      p.errors[0]);
		}
		cg_policy_free(&p);
	}
	static const char head[] = "[rule r]\nkernel = x\nkernel = re:du";
	memset(line, '+', sizeof line);
	memcpy(line, head, strlen(head));
	strcpy(line + strlen(head) + 535, "\n");
	cg_policy_init(&p);
	cg_policy_parse(&p, line, ORIGIN);
	ck_assert_uint_eq(p.nerrors, 1);
	ck_assert_msg(strstr(p.errors[0], "kernel = re:du+++") &&
		      strstr(p.errors[0], "regular expression of 537 bytes, over the bound of 256"),
		      "%s", p.errors[0]);
	cg_policy_free(&p);
}
END_TEST

START_TEST(test_long_line)
{
	size_t n = 5000;
	char *text = malloc(n + 64);
	struct cg_policy p;

	/* a lost header leaves its lines out of the previous rule */
	strcpy(text, "[rule r]\nkernel = a\n[rule ");
	size_t at = strlen(text);
	memset(text + at, 'x', n);
	strcpy(text + at + n, "]\nkernel = b\nmode = warn\n");
	cg_policy_init(&p);
	ck_assert_int_eq(cg_policy_parse(&p, text, ORIGIN), 1);
	ck_assert_str_eq(p.errors[0], "ctxguard: t.conf:3: line longer than"
			 " 4096 bytes (line ignored)");
	ck_assert_uint_eq(p.nrules, 1);
	ck_assert_int_eq(cg_policy_match(&p, "a", NULL, NULL, NULL), 0);
	ck_assert_int_eq(cg_policy_match(&p, "b", NULL, NULL, NULL), -1);
	ck_assert_int_eq(p.mode, CG_ACT_ABORT);
	cg_policy_free(&p);

	/* exactly 4096 bytes is fine */
	memset(text, ' ', 4096);
	memcpy(text, "mode = warn", 11);
	text[4096] = '\0';
	cg_policy_init(&p);
	ck_assert_int_eq(cg_policy_parse(&p, text, ORIGIN), 0);
	ck_assert_int_eq(p.mode, CG_ACT_WARN);
	cg_policy_free(&p);
	free(text);
}
END_TEST

START_TEST(test_error_overflow)
{
	char text[1024] = "quiet = off\n";
	struct cg_policy p;

	for (int i = 0; i < CG_POLICY_MAX_ERRORS + 4; i++)
		strcat(text, "bogus = 1\n");
	strcat(text, "mode = warn\n");
	cg_policy_init(&p);
	ck_assert_int_eq(cg_policy_parse(&p, text, ORIGIN),
			 CG_POLICY_MAX_ERRORS + 4);
	ck_assert_uint_eq(p.nerrors, CG_POLICY_MAX_ERRORS);
	ck_assert_uint_eq(p.errors_dropped, 4);
	ck_assert_str_eq(p.errors[CG_POLICY_MAX_ERRORS - 1],
			 "ctxguard: t.conf:17: unknown key 'bogus' (line ignored)");
	ck_assert_int_eq(p.mode, CG_ACT_WARN);
	cg_policy_free(&p);
}
END_TEST

START_TEST(test_file_sources_bad)
{
	tmpdir_make("check_policy");
	char var[256], want[512];
	struct cg_policy p;

	/* missing CTXGUARD_POLICY file */
	char *missing[] = { "CTXGUARD_POLICY=/nonexistent/p.conf", NULL };
	cg_policy_load_from(&p, missing, NULL);
	ck_assert_uint_eq(p.nerrors, 1);
	ck_assert_str_eq(p.errors[0], "ctxguard: CTXGUARD_POLICY=/nonexistent/"
			 "p.conf: No such file or directory (using the built-in"
			 " policy)");
	assert_default_settings(&p);
	ck_assert_str_eq(p.source, "built-in");
	ck_assert_uint_eq(p.nrules, 1);
	cg_policy_free(&p);

	/* a directory, named by the variable or as the /etc file */
	snprintf(var, sizeof var, "CTXGUARD_POLICY=%s", tmpdir);
	char *dir[] = { var, NULL };
	cg_policy_load_from(&p, dir, NULL);
	ck_assert_uint_eq(p.nerrors, 1);
	snprintf(want, sizeof want, "ctxguard: CTXGUARD_POLICY=%s: not a"
		 " regular file (using the built-in policy)", tmpdir);
	ck_assert_str_eq(p.errors[0], want);
	cg_policy_free(&p);

	/* the system policy unreadable: the strictest one is locked */
	cg_policy_load_from(&p, NULL, tmpdir);
	ck_assert_uint_eq(p.nerrors, 2);
	snprintf(want, sizeof want, "ctxguard: %s: not a regular file (locked at"
		 " the strictest built-in policy)", tmpdir);
	ck_assert_str_eq(p.errors[0], want);
	ck_assert_msg(p.lock && p.mode == CG_ACT_ABORT && p.scope == CG_SCOPE_ALL && p.operands,
		      "%s", p.errors[1]);
	cg_policy_free(&p);

	/* a missing /etc file is no problem */
	cg_policy_load_from(&p, NULL, "/nonexistent/policy.conf");
	ck_assert_uint_eq(p.nerrors, 0);
	cg_policy_free(&p);

	/* a NUL byte ends the file */
	static const char with_nul[] = "mode = warn\n\0scope = all\n";
	const char *nul = write_file("nul.conf", with_nul, sizeof with_nul - 1);
	cg_policy_load_from(&p, NULL, nul);
	ck_assert_uint_eq(p.nerrors, 1);
	snprintf(want, sizeof want, "ctxguard: %s:2: NUL byte (rest of the"
		 " file ignored)", nul);
	ck_assert_str_eq(p.errors[0], want);
	ck_assert_int_eq(p.mode, CG_ACT_WARN);
	ck_assert_int_eq(p.scope, CG_SCOPE_EXPERTS);
	cg_policy_free(&p);

	/* an over-large file is not read at all */
	size_t big = (1 << 20) + 1;
	char *data = malloc(big);
	memset(data, '\n', big);
	memcpy(data, "mode = warn", 11);
	const char *huge = write_file("huge.conf", data, big);
	free(data);
	cg_policy_load_from(&p, NULL, huge);
	ck_assert_uint_eq(p.nerrors, 2);
	snprintf(want, sizeof want, "ctxguard: %s: larger than 1048576 bytes"
		 " (locked at the strictest built-in policy)", huge);
	ck_assert_str_eq(p.errors[0], want);
	ck_assert_int_eq(p.mode, CG_ACT_ABORT);
	ck_assert_int_eq(p.lock, 1);
	cg_policy_free(&p);

	/* errors name the file and line */
	const char *bad = write_text("bad.conf", "mode = warn\nscope = x\n");
	cg_policy_load_from(&p, NULL, bad);
	ck_assert_uint_eq(p.nerrors, 1);
	snprintf(want, sizeof want, "ctxguard: %s:2: scope = x: expected"
		 " experts|all (using experts)", bad);
	ck_assert_str_eq(p.errors[0], want);
	ck_assert_int_eq(p.mode, CG_ACT_WARN);
	cg_policy_free(&p);
	tmpdir_remove();
}
END_TEST

/* ---- matching --------------------------------------------------------- */

static const char match_conf[] =
	"defaults = off\n"
	"[rule by-mangled]\n"
	"kernel = _Z9my_kernelPfi\n"
	"action = warn\n"
	"[rule by-demangled]\n"
	"kernel = ns::conv<*>(*)\n"
	"[rule by-regex]\n"
	"kernel = re:^fused_(add|mul)_[0-9]+$\n"
	"[rule by-module]\n"
	"module = */lib/mine/*.cubin\n"
	"module = re:\\.fatbin$\n"
	"[rule by-image]\n"
	"image = FNV1A64:A0B1C2D3E4F50617\n"
	"[rule broad]\n"
	"kernel = *\n";

START_TEST(test_match_kinds)
{
	struct cg_policy p;

	cg_policy_init(&p);
	ck_assert_int_eq(cg_policy_parse(&p, match_conf, ORIGIN), 0);
	ck_assert_uint_eq(p.nrules, 6);
	int mangled = rule_index(&p, "by-mangled");
	int demangled = rule_index(&p, "by-demangled");
	int regex = rule_index(&p, "by-regex");
	int module = rule_index(&p, "by-module");
	int image = rule_index(&p, "by-image");
	int broad = rule_index(&p, "broad");

	ck_assert_int_eq(cg_policy_match(&p, "_Z9my_kernelPfi",
					 "my_kernel(float*, int)", NULL, NULL),
			 mangled);
	ck_assert_int_eq(cg_policy_match(&p, "_ZN2ns4convIfEEvPf",
					 "ns::conv<float>(float*)", NULL, NULL),
			 demangled);
	ck_assert_int_eq(cg_policy_match(&p, NULL, "ns::conv<float>(float*)",
					 NULL, NULL), demangled);
	ck_assert_int_eq(cg_policy_match(&p, "fused_mul_12", NULL, NULL, NULL),
			 regex);
	/* anchored: a longer name falls through to the broad rule */
	ck_assert_int_eq(cg_policy_match(&p, "fused_mul_12x", NULL, NULL, NULL),
			 broad);
	ck_assert_int_eq(cg_policy_match(&p, NULL, NULL,
					 "/opt/lib/mine/a/k.cubin", NULL), module);
	ck_assert_int_eq(cg_policy_match(&p, NULL, NULL, "/tmp/x.fatbin", NULL),
			 module);
	ck_assert_int_eq(cg_policy_match(&p, NULL, NULL, "/opt/lib/other.cubin",
					 NULL), -1);
	ck_assert_int_eq(cg_policy_match(&p, NULL, NULL, NULL,
					 "fnv1a64:a0b1c2d3e4f50617"), image);
	ck_assert_int_eq(cg_policy_match(&p, NULL, NULL, NULL,
					 "fnv1a64:a0b1c2d3e4f50618"), -1);
	/* module patterns are not kernel patterns and vice versa */
	ck_assert_int_eq(cg_policy_match(&p, NULL, NULL, "fused_add_1", NULL),
			 -1);
	ck_assert_int_eq(cg_policy_match(&p, NULL, NULL, NULL, NULL), -1);
	ck_assert_int_eq(cg_policy_match(NULL, "x", "x", "x", "x"), -1);
	cg_policy_free(&p);
}
END_TEST

START_TEST(test_match_first_wins)
{
	struct cg_policy p;

	cg_policy_init(&p);
	cg_policy_parse(&p, "[rule one]\nkernel = gemm_*\n"
			"[rule two]\nkernel = gemm_bf16\nkernel = other\n", ORIGIN);
	ck_assert_int_eq(cg_policy_match(&p, "gemm_bf16", NULL, NULL, NULL), 0);
	ck_assert_int_eq(cg_policy_match(&p, "other", NULL, NULL, NULL), 1);
	/* a later rule matching the mangled name does not beat an earlier
	 * one matching the demangled name */
	ck_assert_int_eq(cg_policy_match(&p, "gemm_bf16", "gemm_fp8", NULL,
					 NULL), 0);
	cg_policy_free(&p);
}
END_TEST

START_TEST(test_match_defaults_order)
{
	tmpdir_make("check_policy");
	struct cg_policy p;
	const char *dg = "_ZN9deep_gemm19sm90_bf16_gemm_implILj0EEEvPi";

	/* file rules first, then the built-in ones */
	const char *f = write_text("a.conf", "[rule mine]\nkernel = _ZN9deep_gemm*\n");
	cg_policy_load_from(&p, NULL, f);
	ck_assert_uint_eq(p.nrules, 2);
	ck_assert_int_eq(cg_policy_match(&p, dg, NULL, NULL, NULL), 0);
	ck_assert_int_eq(cg_policy_match(&p, "x", "deep_gemm::f()", NULL, NULL), 1);
	cg_policy_free(&p);

	/* defaults = off: only the file's rules */
	f = write_text("b.conf", "defaults = off\n[rule mine]\nkernel = k\n");
	cg_policy_load_from(&p, NULL, f);
	ck_assert_uint_eq(p.nrules, 1);
	ck_assert_int_eq(cg_policy_match(&p, dg, NULL, NULL, NULL), -1);
	cg_policy_free(&p);

	/* a file rule named like a built-in one goes first; both stay */
	f = write_text("c.conf", "[rule deepgemm]\nkernel = only_this\n"
		       "action = warn\n");
	cg_policy_load_from(&p, NULL, f);
	ck_assert_uint_eq(p.nrules, 2);
	ck_assert_int_eq(cg_policy_match(&p, "only_this", NULL, NULL, NULL), 0);
	ck_assert_int_eq(cg_policy_match(&p, dg, NULL, NULL, NULL), 1);
	ck_assert_int_eq(cg_policy_action(&p, 0), CG_ACT_WARN);
	ck_assert_int_eq(cg_policy_action(&p, 1), CG_ACT_ABORT);
	cg_policy_free(&p);

	/* a rule whose every pattern was bad is gone */
	f = write_text("d.conf", "[rule mine]\nkernel = re:[\n");
	cg_policy_load_from(&p, NULL, f);
	ck_assert_uint_eq(p.nerrors, 1);
	ck_assert_uint_eq(p.nrules, 1);
	ck_assert_str_eq(p.rules[0].name, "deepgemm");
	cg_policy_free(&p);
	tmpdir_remove();
}
END_TEST

/* What DeepGEMM's JIT produces must match the built-in rule; cuBLAS,
 * PyTorch and Triton kernels must not. */
START_TEST(test_match_deepgemm)
{
	static const char *const kernels[][2] = {
		{"_ZN9deep_gemm19sm90_bf16_gemm_implILN4cute4UMMA5MajorE0ELS3_0"
		 "ELj0ELj4096ELj7168ELj32ELj128ELj128ELj64EEEvPijjj14CUtensorMap_stS6_S6_",
		 "void deep_gemm::sm90_bf16_gemm_impl<(cute::UMMA::Major)0,"
		 " (cute::UMMA::Major)0, 0u, 4096u, 7168u, 32u, 128u, 128u, 64u>"
		 "(int*, unsigned int, unsigned int, unsigned int, CUtensorMap_st,"
		 " CUtensorMap_st, CUtensorMap_st)"},
		{NULL, "void deep_gemm::sm90_fp8_gemm_1d2d_impl<0u, 4096u>(float*,"
		 " int*, unsigned int, unsigned int, unsigned int, CUtensorMap_st,"
		 " CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)"},
		{NULL, "deep_gemm::transpose_fp32<128u>(float*, float*)"},
		{NULL, "void deep_gemm::fp8_gemm_kernel<128u>(float*)"},
		{"_ZN9deep_gemm15fp8_gemm_kernelILj128EEEvPf", NULL},
		{"_Z19sm90_bf16_gemm_implILj0EEEvPi", NULL},
		{"_Z24sm90_fp8_gemm_1d1d_implILj0EEEvPf", NULL},
		{"sm90_m_grouped_fp8_gemm_contiguous_1d2d", NULL},
		{"_Z24sm100_fp8_gemm_1d1d_implILj0EEEvPi", NULL},
		{"sm100_bf16_gemm_impl<0u>", NULL},
	};
	static const char *const modules[] = {
		("/root/.deep_gemm/cache/kernel.sm90_m_grouped_bf16_gemm_contiguous"
		 ".4f2a9c0d1e3b5a7c/kernel.cubin"),
		"/home/u/.deep_gemm/cache/kernel.sm90_bf16_gemm.0123/kernel.cubin",
		/* DG_JIT_CACHE_DIR=/scratch/dg */
		"/scratch/dg/cache/kernel.sm100_fp8_gemm_1d1d.89ab/kernel.cubin",
	};
	static const char *const others[] = {
		("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_"
		 "warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"),
		("sm100_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_"
		 "cluster2x1x1_execute_segment_k_off_kernel__5x_cublas"),
		"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctor"
		"IfEESt5arrayIPcLm1EEEEviT0_T1_",
		"void at::native::(anonymous namespace)::grouped_mm_kernel<float>()",
		"triton_poi_fused_add_0",
		"_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmUniversalEEEvNT_6ParamsE",
	};
	static const char *const other_modules[] = {
		"/root/.triton/cache/ABCDEF/triton_poi_fused_add_0.cubin",
		"/root/.triton/cache/ABCDEF/kernel.cubin",
		"/usr/lib/x86_64-linux-gnu/libcublasLt.so.12",
		"/opt/app/deep_gemm_notes/kernel.cubin",
	};
	struct cg_policy p;

	cg_policy_load_from(&p, NULL, NULL);
	int dg = rule_index(&p, "deepgemm");
	ck_assert_int_ge(dg, 0);
	for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
		ck_assert_msg(cg_policy_match(&p, kernels[i][0], kernels[i][1],
					      NULL, NULL) == dg, "kernel %zu", i);
	for (size_t i = 0; i < sizeof modules / sizeof modules[0]; i++)
		ck_assert_msg(cg_policy_match(&p, "k", NULL, modules[i], NULL) == dg,
			      "%s", modules[i]);
	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
		ck_assert_msg(cg_policy_match(&p, others[i], others[i], NULL,
					      NULL) == -1, "%s", others[i]);
	for (size_t i = 0; i < sizeof other_modules / sizeof other_modules[0]; i++)
		ck_assert_msg(cg_policy_match(&p, "k", NULL, other_modules[i],
					      NULL) == -1, "%s", other_modules[i]);
	cg_policy_free(&p);
}
END_TEST

START_TEST(test_fnv1a64)
{
	char out[25];
	memset(out, 'X', sizeof out);
	cg_fnv1a64_hex("", 0, out);
	ck_assert_str_eq(out, "fnv1a64:cbf29ce484222325");
	cg_fnv1a64_hex("a", 1, out);
	ck_assert_str_eq(out, "fnv1a64:af63dc4c8601ec8c");
	cg_fnv1a64_hex("foobar", 6, out);
	ck_assert_str_eq(out, "fnv1a64:85944171f73967e8");

	/* the shim's image name matches an image line */
	static const unsigned char image[] = {0x7f, 'E', 'L', 'F', 0, 1, 2, 3};
	char conf[128];
	cg_fnv1a64_hex(image, sizeof image, out);
	snprintf(conf, sizeof conf, "[rule img]\nimage = %s\n", out);
	struct cg_policy p;
	cg_policy_init(&p);
	ck_assert_int_eq(cg_policy_parse(&p, conf, ORIGIN), 0);
	ck_assert_int_eq(cg_policy_match(&p, NULL, NULL, NULL, out), 0);
	cg_policy_free(&p);
}
END_TEST

/* The shim matches from many threads at once against one loaded policy. */
static void *match_many(void *arg)
{
	const struct cg_policy *p = arg;
	intptr_t wrong = 0;

	for (int i = 0; i < 2000; i++) {
		wrong += cg_policy_match(p, "fused_add_7", NULL, NULL, NULL) !=
			rule_index(p, "by-regex");
		wrong += cg_policy_match(p, NULL, NULL, "/a/lib/mine/k.cubin",
					 NULL) != rule_index(p, "by-module");
		wrong += cg_policy_match(p, NULL, NULL, NULL, NULL) != -1;
	}
	return (void *)wrong;
}

START_TEST(test_match_threads)
{
	struct cg_policy p;
	pthread_t t[8];

	cg_policy_init(&p);
	cg_policy_parse(&p, match_conf, ORIGIN);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, match_many, &p), 0);
	for (int i = 0; i < 8; i++) {
		void *wrong;
		ck_assert_int_eq(pthread_join(t[i], &wrong), 0);
		ck_assert_ptr_null(wrong);
	}
	cg_policy_free(&p);
}
END_TEST

/* ---- actions ---------------------------------------------------------- */

START_TEST(test_actions)
{
	struct cg_policy p;

	cg_policy_init(&p);
	cg_policy_parse(&p, "mode = warn\n"
			"[rule own]\nkernel = a\naction = error\n"
			"[rule follows]\nkernel = b\n"
			"[rule off]\nkernel = c\naction = off\n", ORIGIN);
	ck_assert_int_eq(cg_policy_action(&p, 0), CG_ACT_ERROR);
	ck_assert_int_eq(cg_policy_action(&p, 1), CG_ACT_WARN);
	ck_assert_int_eq(cg_policy_action(&p, 2), CG_ACT_OFF);
	/* non-expert kernels: checked only with scope = all */
	ck_assert_int_eq(cg_policy_action(&p, -1), CG_ACT_OFF);
	ck_assert_int_eq(cg_policy_action(&p, 99), CG_ACT_OFF);
	p.scope = CG_SCOPE_ALL;
	ck_assert_int_eq(cg_policy_action(&p, -1), CG_ACT_WARN);
	p.mode = CG_ACT_ABORT;
	ck_assert_int_eq(cg_policy_action(&p, -1), CG_ACT_ABORT);
	ck_assert_int_eq(cg_policy_action(&p, 1), CG_ACT_ABORT);
	ck_assert_int_eq(cg_policy_action(&p, 0), CG_ACT_ERROR);
	ck_assert_int_eq(cg_policy_action(NULL, 0), CG_ACT_OFF);
	cg_policy_free(&p);

	char *env[] = { "CTXGUARD_POLICY=none", "CTXGUARD_SCOPE=all",
			"CTXGUARD_MODE=error", NULL };
	cg_policy_load_from(&p, env, NULL);
	ck_assert_int_eq(cg_policy_action(&p, -1), CG_ACT_ERROR);
	ck_assert_int_eq(cg_policy_action(&p, 0), CG_ACT_ERROR);
	cg_policy_free(&p);
}
END_TEST

/* ---- messages --------------------------------------------------------- */

static const char documented[] =
	"DeepGEMM experts selected on a model spanning multiple CUDA devices in"
	" one process; its kernels are bound to a single CUDA context and"
	" corrupt across devices. Use `experts_implementation='grouped_mm'`, or"
	" run one device per process (TP/EP).";

START_TEST(test_messages)
{
	struct cg_policy p;

	ck_assert_str_eq(cg_deepgemm_message, documented);
	cg_policy_load_from(&p, NULL, NULL);
	int dg = rule_index(&p, "deepgemm");
	ck_assert_str_eq(p.rules[dg].message, cg_deepgemm_message);
	ck_assert_str_eq(cg_crossing_message(&p, dg), cg_deepgemm_message);

	const char *generic = cg_crossing_message(&p, -1);
	ck_assert(strncmp(generic, "ctxguard: ", 10) == 0);
	ck_assert_ptr_nonnull(strstr(generic, "CUDA contexts"));
	ck_assert_ptr_null(strchr(generic, '\n'));
	ck_assert_str_eq(cg_crossing_message(&p, 7), generic);
	ck_assert_str_eq(cg_crossing_message(NULL, 0), generic);
	cg_policy_free(&p);

	cg_policy_init(&p);
	cg_policy_parse(&p, "[rule plain]\nkernel = a\n"
			"[rule said]\nkernel = b\nmessage =  Stop: \"b\" crossed  \n",
			ORIGIN);
	ck_assert_str_eq(cg_crossing_message(&p, 0), generic);
	ck_assert_str_eq(cg_crossing_message(&p, 1), "Stop: \"b\" crossed");
	cg_policy_free(&p);
}
END_TEST

/* ---- the report ------------------------------------------------------- */

static struct cg_operand sample_ops[2];

static struct cg_crossing sample_crossing(char kind, int action, int rule)
{
	sample_ops[0] = (struct cg_operand){4, 1, 0x7f1200000000ULL, "tensor map 4096x7168 bf16",
					    "GPU-5a6b7c8d-0000-1111-2222-333344445555"};
	sample_ops[1] = (struct cg_operand){5, 1, 0x7f1300000000ULL, NULL, NULL};
	struct cg_crossing c = {
		.kind = kind,
		.api = "cuLaunchKernelEx",
		.kernel = "_ZN9deep_gemm19sm90_bf16_gemm_implILj0EEEvPi",
		.demangled = "void deep_gemm::sm90_bf16_gemm_impl<0u>(int*)",
		.origin = "/root/.deep_gemm/cache/kernel.sm90_bf16_gemm.ab/kernel.cubin",
		.load_api = "cuKernelGetFunction",
		.function = (const void *)0x5555a000,
		.owner_ctx = (const void *)0x5555c0de,
		.owner_dev = 0,
		.launch_ctx = (const void *)0x5555beef,
		.launch_dev = 1,
		.stream = (const void *)0x7f00aa,
		.rule = rule,
		.action = action,
		.pid = 4242,
		.tid = 4243,
		.owner_pci = "0000:18:00.0",
		.owner_uuid = "GPU-00000000-1111-2222-3333-444444444444",
		.launch_pci = "0000:19:00.0",
		.launch_uuid = "GPU-5a6b7c8d-0000-1111-2222-333344445555",
		.operands = kind == 'b' ? sample_ops : NULL,
		.noperands = kind == 'b',
	};
	return c;
}

static char *report(const struct cg_policy *p, const struct cg_crossing *c)
{
	size_t len = cg_format_report(NULL, 0, p, c);
	char *buf = malloc(len + 1);
	ck_assert_uint_eq(cg_format_report(buf, len + 1, p, c), len);
	ck_assert_uint_eq(strlen(buf), len);
	return buf;
}

static void assert_has(const char *text, const char *part)
{
	ck_assert_msg(strstr(text, part) != NULL, "missing \"%s\" in:\n%s",
		      part, text);
}

START_TEST(test_report_owner)
{
	struct cg_policy p;
	cg_policy_load_from(&p, NULL, NULL);
	int dg = rule_index(&p, "deepgemm");
	struct cg_crossing c = sample_crossing('a', CG_ACT_ABORT, dg);
	char *r = report(&p, &c);

	size_t first = strcspn(r, "\n");
	ck_assert_uint_eq(first, strlen(cg_deepgemm_message));
	ck_assert(memcmp(r, cg_deepgemm_message, first) == 0);
	/* every further line is a ctxguard line, and the text ends a line */
	for (const char *l = r + first + 1; *l; l = strchr(l, '\n') + 1)
		ck_assert(strncmp(l, "ctxguard: ", 10) == 0);
	ck_assert_int_eq(r[strlen(r) - 1], '\n');

	assert_has(r, "\nctxguard: cross-context launch stopped (abort): the"
		   " function belongs to another context\n");
	assert_has(r, "\nctxguard: kernel _ZN9deep_gemm19sm90_bf16_gemm_implILj0"
		   "EEEvPi [void deep_gemm::sm90_bf16_gemm_impl<0u>(int*)]\n");
	assert_has(r, "\nctxguard: owner: context 0x5555c0de on device 0"
		   " (cuKernelGetFunction from /root/.deep_gemm/cache/kernel."
		   "sm90_bf16_gemm.ab/kernel.cubin)\n");
	assert_has(r, "\nctxguard: launch: context 0x5555beef on device 1 via"
		   " cuLaunchKernelEx, stream 0x7f00aa\n");
	ck_assert_ptr_null(strstr(r, "operand:"));
	assert_has(r, "\nctxguard: rule: deepgemm (built-in:");
	assert_has(r, "\nctxguard: process: pid 4242 tid 4243\n");
	assert_has(r, "\nctxguard: fix: load the model with experts_"
		   "implementation='grouped_mm', or run one device per process"
		   " (TP/EP); CTXGUARD_MODE=warn only reports such launches\n");
	free(r);
	cg_policy_free(&p);
}
END_TEST

START_TEST(test_report_operand)
{
	struct cg_policy p;
	cg_policy_init(&p);
	cg_policy_parse(&p, "error_code = CUDA_ERROR_INVALID_CONTEXT\n", ORIGIN);
	struct cg_crossing c = sample_crossing('b', CG_ACT_ERROR, -1);
	c.demangled = NULL;
	c.owner_dev = -1;
	struct cg_operand unknown = {4, -1, 0x7f1200000000ULL, NULL, NULL};
	c.operands = &unknown;
	c.origin = NULL;
	char *r = report(&p, &c);

	ck_assert(strncmp(r, cg_crossing_message(&p, -1),
			  strlen(cg_crossing_message(&p, -1))) == 0);
	assert_has(r, "\nctxguard: cross-context launch refused (error: returns"
		   " 201 CUDA_ERROR_INVALID_CONTEXT): an operand lives on another"
		   " device\n");
	assert_has(r, "\nctxguard: kernel _ZN9deep_gemm19sm90_bf16_gemm_implILj0"
		   "EEEvPi\n");
	assert_has(r, "\nctxguard: owner: context 0x5555c0de on unknown device"
		   " (cuKernelGetFunction)\n");
	assert_has(r, "\nctxguard: operand: parameter 4 = 0x7f1200000000 on"
		   " unknown device (pointer)\n");
	assert_has(r, "\nctxguard: rule: none (scope all)\n");
	assert_has(r, "\nctxguard: fix: launch the kernel on the device that"
		   " holds the operand");
	free(r);

	/* warn: allowed, no advice to switch to warn; missing fields */
	c = sample_crossing('b', CG_ACT_WARN, -1);
	c.kernel = NULL;
	c.api = NULL;
	c.load_api = NULL;
	c.origin = NULL;
	r = report(&p, &c);
	assert_has(r, "\nctxguard: cross-context launch allowed (warn): an"
		   " operand lives on another device\n");
	assert_has(r, "\nctxguard: kernel <unknown> [void deep_gemm::");
	assert_has(r, "\nctxguard: owner: context 0x5555c0de on device 0\n");
	assert_has(r, " via an unknown call, stream 0x7f00aa\n");
	assert_has(r, "(tensor map 4096x7168 bf16)\n");
	ck_assert_ptr_null(strstr(r, "CTXGUARD_MODE=warn"));
	free(r);

	/* one report for the launch, a line per operand that crosses */
	c.noperands = 2;
	r = report(&p, &c);
	assert_has(r, "\nctxguard: cross-context launch allowed (warn): 2"
		   " operands live on another device\n");
	assert_has(r, "\nctxguard: operand: parameter 4 = 0x7f1200000000 on device 1"
		   " (tensor map 4096x7168 bf16)\nctxguard: operand: parameter 5 ="
		   " 0x7f1300000000 on device 1 (pointer)\n");
	free(r);

	/* a rule without message or fix of its own, and no policy at all */
	cg_policy_parse(&p, "[rule mine]\nkernel = k\n", ORIGIN);
	c = sample_crossing('a', CG_ACT_ABORT, 0);
	r = report(&p, &c);
	assert_has(r, "\nctxguard: rule: mine (t.conf:1)\n");
	assert_has(r, "\nctxguard: fix: get the function in the launching"
		   " context");
	free(r);
	r = report(NULL, &c);
	assert_has(r, "\nctxguard: rule: none (scope all)\n");
	free(r);
	cg_policy_free(&p);
}
END_TEST

typedef size_t (*formatter)(char *, size_t, const struct cg_policy *,
			    const struct cg_crossing *);

/* Every buffer size gives a NUL-terminated prefix of the full text, never
 * a byte written past n, and always the full length back. */
static void check_truncation(formatter f, const struct cg_policy *p,
			     const struct cg_crossing *c)
{
	size_t len = f(NULL, 0, p, c);
	char *full = malloc(len + 1);
	char *buf = malloc(len + 16);

	ck_assert_uint_eq(f(full, len + 1, p, c), len);
	for (size_t n = 0; n <= len + 2; n++) {
		memset(buf, 'X', len + 16);
		ck_assert_uint_eq(f(buf, n, p, c), len);
		if (n) {
			size_t kept = n - 1 < len ? n - 1 : len;
			ck_assert_uint_eq(strlen(buf), kept);
			ck_assert(memcmp(buf, full, kept) == 0);
		}
		for (size_t i = n; i < len + 16; i++)
			ck_assert_int_eq(buf[i], 'X');
	}
	free(buf);
	free(full);
}

START_TEST(test_report_truncation)
{
	struct cg_policy p;
	cg_policy_load_from(&p, NULL, NULL);
	struct cg_crossing a = sample_crossing('a', CG_ACT_ABORT, 0);
	struct cg_crossing b = sample_crossing('b', CG_ACT_ERROR, -1);
	check_truncation(cg_format_report, &p, &a);
	check_truncation(cg_format_report, &p, &b);
	check_truncation(cg_format_json, &p, &a);
	check_truncation(cg_format_json, &p, &b);
	cg_policy_free(&p);
}
END_TEST

/* ---- JSON ------------------------------------------------------------- */

/* A small JSON syntax checker: enough to prove a log line parses. */
static const char *js_value(const char *s);

static const char *js_ws(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	return s;
}

static const char *js_string(const char *s)
{
	if (*s++ != '"')
		return NULL;
	while (*s != '"') {
		if ((unsigned char)*s < 0x20)   /* also the NUL */
			return NULL;
		if (*s == '\\') {
			s++;
			if (*s == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!strchr("0123456789abcdefABCDEF", s[i]) ||
					    !s[i])
						return NULL;
				s += 5;
			} else if (*s && strchr("\"\\/bfnrt", *s)) {
				s++;
			} else {
				return NULL;
			}
		} else {
			s++;
		}
	}
	return s + 1;
}

static const char *js_number(const char *s)
{
	if (*s == '-')
		s++;
	if (*s < '0' || *s > '9')
		return NULL;
	while (*s >= '0' && *s <= '9')
		s++;
	return s;
}

static const char *js_members(const char *s, char close, int keyed)
{
	s = js_ws(s + 1);
	if (*s == close)
		return s + 1;
	for (;;) {
		if (keyed) {
			s = js_string(js_ws(s));
			if (!s || *(s = js_ws(s)) != ':')
				return NULL;
			s++;
		}
		s = js_value(s);
		if (!s)
			return NULL;
		s = js_ws(s);
		if (*s == close)
			return s + 1;
		if (*s++ != ',')
			return NULL;
	}
}

static const char *js_value(const char *s)
{
	s = js_ws(s);
	switch (*s) {
	case '{':
		return js_members(s, '}', 1);
	case '[':
		return js_members(s, ']', 0);
	case '"':
		return js_string(s);
	case 't':
		return strncmp(s, "true", 4) ? NULL : s + 4;
	case 'f':
		return strncmp(s, "false", 5) ? NULL : s + 5;
	case 'n':
		return strncmp(s, "null", 4) ? NULL : s + 4;
	default:
		return js_number(s);
	}
}

static int utf8_valid(const unsigned char *s)
{
	while (*s) {
		int n = *s < 0x80 ? 1 : (*s & 0xe0) == 0xc0 ? 2 :
			(*s & 0xf0) == 0xe0 ? 3 : (*s & 0xf8) == 0xf0 ? 4 : 0;
		if (!n || (n == 2 && *s < 0xc2))
			return 0;
		for (int i = 1; i < n; i++)
			if ((s[i] & 0xc0) != 0x80)
				return 0;
		s += n;
	}
	return 1;
}

static int json_valid(const char *s)
{
	const char *end = js_value(s);
	return end && *js_ws(end) == '\0' &&
		utf8_valid((const unsigned char *)s);
}

START_TEST(test_json_checker)
{
	ck_assert(json_valid("{\"a\":[1,-2,\"x\\u00e9\"],\"b\":{},\"c\":null}"));
	ck_assert(!json_valid("{\"a\":1,}"));
	ck_assert(!json_valid("{\"a\":\"\x01\"}"));
	ck_assert(!json_valid("{\"a\":\"\\x\"}"));
	ck_assert(!json_valid("{\"a\":1} x"));
	ck_assert(!json_valid("{\"a\":\"\xff\"}"));
}
END_TEST

static char *escaped(const char *s)
{
	size_t len = cg_json_escape(NULL, 0, s);
	char *buf = malloc(len + 1);
	ck_assert_uint_eq(cg_json_escape(buf, len + 1, s), len);
	return buf;
}

/* stderr's escapes are the log's, but quotes and backslashes stay, and
 * newlines are escaped in a message or kept in a report. */
START_TEST(test_text_escape)
{
	static const char s[] = "a\"b\\c\n\x1b[2J\x9b\xc2\x9b\xff\xc3\xa9\t";
	char buf[128];
	ck_assert_uint_eq(cg_text_escape(buf, sizeof buf, s, 0), strlen(buf));
	ck_assert_str_eq(buf, "a\"b\\c\\n\\u001b[2J\\ufffd\\u009b\\ufffd\xc3\xa9\\t");
	cg_text_escape(buf, sizeof buf, s, 1);
	ck_assert_str_eq(buf, "a\"b\\c\n\\u001b[2J\\ufffd\\u009b\\ufffd\xc3\xa9\\t");
	ck_assert_uint_eq(cg_text_escape(buf, 4, "\x1b", 0), 6);
	ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(test_json_escape)
{
	static const char *const cases[][2] = {
		{"plain", "plain"},
		{"a\"b", "a\\\"b"},
		{"back\\slash", "back\\\\slash"},
		{"tab\there\nnl\rcr\bbs\fff", "tab\\there\\nnl\\rcr\\bbs\\fff"},
		{"\001\037\177", "\\u0001\\u001f\\u007f"},
		{"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac"
		 " \xf0\x9f\x98\x80"},
		{"bad\xff\xc3(", "bad\\ufffd\\ufffd("},
		{"\xc0\xaf\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"},
		{"cut\xe2\x82", "cut\\ufffd\\ufffd"},
		/* C1 codes (0x9b: CSI) escaped; U+00A0 and up kept */
		{"\xc2\x80\xc2\x9b\xc2\x9f\xc2\xa0", "\\u0080\\u009b\\u009f\xc2\xa0"},
		{"", ""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *e = escaped(cases[i][0]);
		ck_assert_str_eq(e, cases[i][1]);
		char quoted[128];
		snprintf(quoted, sizeof quoted, "\"%s\"", e);
		ck_assert_msg(json_valid(quoted), "%s", quoted);
		free(e);
	}
	ck_assert_uint_eq(cg_json_escape(NULL, 0, NULL), 0);

	/* truncation: a prefix, terminated, nothing past n */
	char buf[8];
	memset(buf, 'X', sizeof buf);
	ck_assert_uint_eq(cg_json_escape(buf, 4, "a\"bcd"), 6);
	ck_assert_str_eq(buf, "a\\\"");
	ck_assert_int_eq(buf[4], 'X');
	memset(buf, 'X', sizeof buf);
	ck_assert_uint_eq(cg_json_escape(buf, 1, "abc"), 3);
	ck_assert_str_eq(buf, "");
	ck_assert_int_eq(buf[1], 'X');

	/* A short buffer holds whole escapes and UTF-8 sequences only: the
	 * callers quote it inside a log record (config_error, unhooked),
	 * where half of one ("\u00", a lone backslash eating the closing
	 * quote) made the line invalid JSON. */
	static const char tricky[] = "a\"b\\c\001d\xc3\xa9" "e\xff\tf";
	size_t len = cg_json_escape(NULL, 0, tricky);
	char *full = escaped(tricky), *cut = malloc(len + 2);
	for (size_t n = 1; n <= len + 1; n++) {
		memset(cut, 'X', len + 2);
		ck_assert_uint_eq(cg_json_escape(cut, n, tricky), len);
		size_t kept = strlen(cut);
		ck_assert(kept < n && strncmp(cut, full, kept) == 0);
		ck_assert_int_eq(cut[n], 'X');
		char quoted[128];
		snprintf(quoted, sizeof quoted, "\"%s\"", cut);
		ck_assert_msg(json_valid(quoted), "n %zu: %s", n, quoted);
	}
	free(cut);
	free(full);
}
END_TEST

static char *json(const struct cg_policy *p, const struct cg_crossing *c)
{
	size_t len = cg_format_json(NULL, 0, p, c);
	char *buf = malloc(len + 1);
	ck_assert_uint_eq(cg_format_json(buf, len + 1, p, c), len);
	ck_assert_msg(json_valid(buf), "invalid JSON: %s", buf);
	ck_assert_ptr_null(strchr(buf, '\n'));
	return buf;
}

START_TEST(test_json_fields)
{
	struct cg_policy p;
	cg_policy_load_from(&p, NULL, NULL);
	struct cg_crossing c = sample_crossing('a', CG_ACT_ABORT, 0);
	char *j = json(&p, &c);

	static const char head[] = "{\"event\":\"crossing\",\"kind\":\"a\","
		"\"action\":\"abort\",\"api\":\"cuLaunchKernelEx\","
		"\"kernel\":\"_ZN9deep_gemm";
	ck_assert(strncmp(j, head, strlen(head)) == 0);
	assert_has(j, ",\"demangled\":\"void deep_gemm::sm90_bf16_gemm_impl"
		   "<0u>(int*)\",");
	assert_has(j, ",\"origin\":\"/root/.deep_gemm/cache/kernel."
		   "sm90_bf16_gemm.ab/kernel.cubin\",");
	assert_has(j, ",\"load_api\":\"cuKernelGetFunction\",");
	assert_has(j, ",\"function\":\"0x5555a000\",");
	assert_has(j, ",\"owner_ctx\":\"0x5555c0de\",\"owner_dev\":0,");
	assert_has(j, ",\"launch_ctx\":\"0x5555beef\",\"launch_dev\":1,");
	assert_has(j, ",\"stream\":\"0x7f00aa\",");
	assert_has(j, ",\"owner_dev\":0,\"owner_pci\":\"0000:18:00.0\",\"owner_uuid\":"
		   "\"GPU-00000000-1111-2222-3333-444444444444\",");
	assert_has(j, ",\"launch_dev\":1,\"launch_pci\":\"0000:19:00.0\",\"launch_uuid\":"
		   "\"GPU-5a6b7c8d-0000-1111-2222-333344445555\",");
	assert_has(j, ",\"rule\":\"deepgemm\"}");
	/* the log writer adds the process's own fields */
	ck_assert_ptr_null(strstr(j, "\"pid\""));
	ck_assert_ptr_null(strstr(j, "\"operands\""));
	free(j);

	c = sample_crossing('b', CG_ACT_WARN, -1);
	c.demangled = NULL;
	c.origin = NULL;
	c.owner_dev = -1;
	c.stream = NULL;
	c.kernel = "k\"\\\n\x01\xff";
	c.owner_uuid = NULL;
	sample_ops[0].shape = "tensor \"map\"";
	j = json(&p, &c);
	assert_has(j, ",\"kind\":\"b\",\"action\":\"warn\",");
	assert_has(j, ",\"kernel\":\"k\\\"\\\\\\n\\u0001\\ufffd\",");
	assert_has(j, ",\"demangled\":null,\"origin\":null,");
	assert_has(j, ",\"owner_dev\":-1,");
	assert_has(j, ",\"stream\":\"0x0\",");
	assert_has(j, ",\"rule\":null,");
	assert_has(j, ",\"owner_uuid\":null,");
	assert_has(j, ",\"noperands\":1,\"operands\":[{\"param\":4,\"addr\":\"0x7f1200000000\","
		   "\"addr_dev\":1,\"addr_uuid\":\"GPU-5a6b7c8d-0000-1111-2222-333344445555\","
		   "\"operand\":\"tensor \\\"map\\\"\"}]}");
	free(j);

	/* one launch, every operand that crosses */
	c.noperands = 2;
	j = json(&p, &c);
	assert_has(j, ",\"noperands\":2,\"operands\":[{\"param\":4,");
	assert_has(j, "\"},{\"param\":5,\"addr\":\"0x7f1300000000\",\"addr_dev\":1,"
		   "\"addr_uuid\":null,\"operand\":\"pointer\"}]}");
	free(j);

	c.noperands = 0;
	c.kind = 0;
	j = json(NULL, &c);
	assert_has(j, ",\"kind\":\"\",");
	free(j);
	cg_policy_free(&p);
}
END_TEST

/* ---- suite ------------------------------------------------------------ */

#define NELEMS(a) (int)(sizeof(a) / sizeof((a)[0]))

static Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc;

	tc = tcase_create("defaults");
	tcase_add_test(tc, test_init_defaults);
	tcase_add_test(tc, test_load_defaults);
	tcase_add_test(tc, test_default_conf_matches_code);
	tcase_add_test(tc, test_embedded_equals_disk);
	tcase_add_test(tc, test_action_names);
	tcase_add_test(tc, test_cuda_error_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("keys");
	tcase_add_test(tc, test_every_key);
	tcase_add_test(tc, test_value_forms);
	suite_add_tcase(s, tc);

	tc = tcase_create("environment");
	tcase_add_test(tc, test_env_good);
	tcase_add_test(tc, test_redirect_settings);
	tcase_add_loop_test(tc, test_env_bad, 0, NELEMS(bad_env));
	tcase_add_test(tc, test_env_overrides_file);
	tcase_add_test(tc, test_etc_file);
	suite_add_tcase(s, tc);

	tc = tcase_create("file_errors");
	tcase_add_loop_test(tc, test_file_error, 0, NELEMS(bad_files));
	tcase_add_test(tc, test_long_line);
	tcase_add_test(tc, test_regex_bound);
	tcase_add_test(tc, test_error_overflow);
	tcase_add_test(tc, test_file_sources_bad);
	suite_add_tcase(s, tc);

	tc = tcase_create("matching");
	tcase_add_test(tc, test_match_kinds);
	tcase_add_test(tc, test_match_first_wins);
	tcase_add_test(tc, test_match_defaults_order);
	tcase_add_test(tc, test_match_deepgemm);
	tcase_add_test(tc, test_fnv1a64);
	tcase_add_test(tc, test_match_threads);
	suite_add_tcase(s, tc);

	tc = tcase_create("actions");
	tcase_add_test(tc, test_actions);
	suite_add_tcase(s, tc);

	tc = tcase_create("messages");
	/* the truncation checks are quadratic in the text's length: slow
	 * under the sanitizers */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_messages);
	tcase_add_test(tc, test_report_owner);
	tcase_add_test(tc, test_report_operand);
	tcase_add_test(tc, test_report_truncation);
	/* Every truncation length of four reports: ThreadSanitizer on a busy
	 * machine takes longer than Check's default 4 s. */
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("json");
	tcase_add_test(tc, test_json_checker);
	tcase_add_test(tc, test_json_escape);
	tcase_add_test(tc, test_text_escape);
	tcase_add_test(tc, test_json_fields);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(policy_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
