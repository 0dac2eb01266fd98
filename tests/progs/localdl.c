/* dlsym(RTLD_DEFAULT) and dlvsym(RTLD_DEFAULT) called from a library loaded
 * RTLD_LOCAL: the loader searches the caller's own local scope too, so the
 * library finds its own symbols (a "cu" name among them) -- under the shim
 * as without it.  Exit 0 and "localdl: ok" when it does. */
#include <dlfcn.h>
#include <stdio.h>

typedef void *(*find_fn)(const char *);
typedef void *(*vfind_fn)(const char *, const char *);

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: localdl LIBRARY\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("localdl: %s\n", dlerror());
		return 2;
	}
	find_fn find = (find_fn)dlsym(h, "cgtest_dlsym_default");
	vfind_fn vfind = (vfind_fn)dlsym(h, "cgtest_dlvsym_default");
	if (!find || !vfind) {
		puts("localdl: the library's lookups are missing");
		return 2;
	}
	int bad = 0;
	static const char *const names[] = {"cgtest_marker", "cuCgtestMarker"};
	for (int i = 0; i < 2; i++) {
		void *want = dlsym(h, names[i]);
		void *got = find(names[i]);
		/* No version information: any version matches. */
		void *vgot = vfind(names[i], "CGTEST_1");
		printf("%s: dlsym %p, dlvsym %p, want %p\n", names[i], got, vgot, want);
		bad |= !want || got != want || vgot != want;
	}
	puts(bad ? "localdl: RTLD_DEFAULT lookups from a local library broken" : "localdl: ok");
	return bad;
}
