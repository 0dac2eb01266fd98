/* Action names: the words the policy file, the environment and the reports
 * use for enum cg_action. */
#include <strings.h>

#include "policy.h"

static const char *const action_names[] = {
	[CG_ACT_OFF] = "off",
	[CG_ACT_WARN] = "warn",
	[CG_ACT_ERROR] = "error",
	[CG_ACT_ABORT] = "abort",
	[CG_ACT_REDIRECT] = "redirect",
};

#define NACTIONS (int)(sizeof action_names / sizeof action_names[0])

const char *cg_action_name(int action)
{
	if (action == CG_ACT_UNSET)
		return "unset";
	if (action < 0 || action >= NACTIONS)
		return "invalid";
	return action_names[action];
}

int cg_action_parse(const char *s)
{
	if (!s)
		return -1;
	for (int a = 0; a < NACTIONS; a++)
		if (strcasecmp(s, action_names[a]) == 0)
			return a;
	return -1;
}
