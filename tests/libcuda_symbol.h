/* A libcuda entry point past ctxguard's hooks, for programs that must reach
 * the driver itself while ctxguard is preloaded (GPU case 40's unhooked
 * launch, the launch benchmark's in-process rows).  ctxguard's dlsym and
 * cuGetProcAddress answer with its wrappers, so the address is read from
 * the file of the loaded libcuda.so.1: its .dynsym (a defined function,
 * default version), plus the load address.  Every read is bounded by the
 * file's size. */
#ifndef CG_TESTS_LIBCUDA_SYMBOL_H
#define CG_TESTS_LIBCUDA_SYMBOL_H

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether section s lies inside a file of size bytes */
static inline int libcuda_section_inside(const ElfW(Shdr) * s, size_t size)
{
	return s->sh_offset <= size && s->sh_size <= size - s->sh_offset;
}

/* name's address in the loaded libcuda.so.1, or NULL after saying why on
 * stderr; *path (when path is not NULL) is the file read. */
static inline void *libcuda_symbol(const char *name, const char **path)
{
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	struct link_map *lm = NULL;
	struct stat st;
	void *found = NULL;
	int fd = -1;

	if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) {
		fprintf(stderr, "%s: libcuda.so.1 is not loaded by that name\n",
			program_invocation_short_name);
		return NULL;
	}
	if ((fd = open(lm->l_name, O_RDONLY)) < 0 || fstat(fd, &st) != 0 ||
	    (size_t)st.st_size < sizeof(ElfW(Ehdr))) {
		fprintf(stderr, "%s: %s: cannot read its ELF header\n",
			program_invocation_short_name, lm->l_name);
		if (fd >= 0)
			close(fd);
		dlclose(h);
		return NULL;
	}
	const size_t size = (size_t)st.st_size, len = strlen(name);
	const unsigned char *f = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f == MAP_FAILED) {
		fprintf(stderr, "%s: mmap %s: %s\n", program_invocation_short_name, lm->l_name,
			strerror(errno));
		dlclose(h);
		return NULL;
	}
	const ElfW(Ehdr) *e = (const void *)f;
	const ElfW(Shdr) *sh = (const void *)(f + e->e_shoff);
	const ElfW(Shdr) *dynsym = NULL, *versym = NULL;
	if (e->e_shoff <= size && e->e_shnum <= (size - e->e_shoff) / sizeof *sh)
		for (int i = 0; i < e->e_shnum; i++) {
			if (sh[i].sh_type == SHT_DYNSYM && sh[i].sh_link < e->e_shnum &&
			    libcuda_section_inside(&sh[i], size) &&
			    libcuda_section_inside(&sh[sh[i].sh_link], size))
				dynsym = &sh[i];
			if (sh[i].sh_type == SHT_GNU_versym && libcuda_section_inside(&sh[i], size))
				versym = &sh[i];
		}
	if (dynsym) {
		const ElfW(Sym) *sym = (const void *)(f + dynsym->sh_offset);
		const ElfW(Half) *ver = versym ? (const void *)(f + versym->sh_offset) : NULL;
		const ElfW(Shdr) *str = &sh[dynsym->sh_link];
		const size_t n = dynsym->sh_size / sizeof *sym;
		for (size_t i = 0; i < n && !found; i++)
			if (sym[i].st_value && ELF64_ST_TYPE(sym[i].st_info) == STT_FUNC &&
			    sym[i].st_name < str->sh_size && len < str->sh_size - sym[i].st_name &&
			    !(ver && i < versym->sh_size / sizeof *ver && (ver[i] & 0x8000)) &&
			    memcmp(f + str->sh_offset + sym[i].st_name, name, len + 1) == 0)
				found = (void *)(lm->l_addr + sym[i].st_value);
	}
	if (!found)
		fprintf(stderr, "%s: no %s in %s's .dynsym\n", program_invocation_short_name, name,
			lm->l_name);
	else if (path)
		*path = lm->l_name;
	munmap((void *)f, size);
	dlclose(h);
	return found;
}

#endif
