/* policy/default.conf, embedded so that the library carries its default
 * rules even where /etc/ctxguard/policy.conf is absent.  The path is
 * relative to the repository root, where compilation runs; this object
 * must be rebuilt whenever default.conf changes (the Makefile says so). */
#include "policy.h"

__asm__(".section .rodata\n"
	".globl cg_default_conf\n"
	".hidden cg_default_conf\n"
	".type cg_default_conf, @object\n"
	"cg_default_conf:\n"
	".incbin \"policy/default.conf\"\n"
	".byte 0\n"
	".size cg_default_conf, . - cg_default_conf\n"
	".previous\n");
