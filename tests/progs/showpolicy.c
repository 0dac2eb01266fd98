/* Prints the policy that the environment it runs in produces, with
 * SYSTEM_FILE as the system policy: run under the ctxguard command to see
 * what its flags amount to, and setuid to see secure execution.
 *
 *   showpolicy SYSTEM_FILE */
#include <stdio.h>
#include <stdlib.h>

#include "policy_dump.h"

extern char **environ;

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: showpolicy SYSTEM_FILE\n");
		return 2;
	}
	struct cg_policy p;
	cg_policy_load_from(&p, environ, argv[1]);
	dump_policy(stdout, &p);
	cg_policy_free(&p);
	return 0;
}
