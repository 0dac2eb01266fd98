/* The kernels' fatbin (kernels/kernels.mk builds it; CG_GMM_FATBIN is its
 * path), linked into read-only data so the library needs no file at run time. */
#ifndef CG_NO_KERNELS
__asm__(".pushsection .rodata.cg_gmm_fatbin, \"a\", @progbits\n"
	".balign 64\n"
	".globl cg_gmm_fatbin\n"
	".hidden cg_gmm_fatbin\n"
	".type cg_gmm_fatbin, @object\n"
	"cg_gmm_fatbin:\n"
	".incbin \"" CG_GMM_FATBIN "\"\n"
	".size cg_gmm_fatbin, . - cg_gmm_fatbin\n"
	".popsection\n");
#endif
