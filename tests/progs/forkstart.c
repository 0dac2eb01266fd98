/* A fork while another thread is starting the shim: the child has no
 * thread to finish that start-up, and must not wait for it.  The first
 * hooked call (a dlsym on libcuda, in a thread) starts the shim, which
 * loads CTXGUARD_CUPTI; the library holds while the FIFO argv[1] is open
 * for writing, where the variable argv[2] (default CG_TEST_HOLD) tells it
 * to: libcgtest.so in its constructor, the fake CUPTI in its subscribe
 * (CG_FAKE_CUPTI_HOLD, the shim's backstop lock held).  The fork comes
 * then, and the child makes a hooked call of its own.  Exit 0 and
 * "forkstart: ok" when it returns. */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void *libcuda;

static void *first_lookup(void *unused)
{
	(void)unused;
	return dlsym(libcuda, "cuInit");
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: forkstart FIFO [VARIABLE]\n");
		return 2;
	}
	const char *fifo = argv[1], *var = argc == 3 ? argv[2] : "CG_TEST_HOLD";
	unlink(fifo);
	if (mkfifo(fifo, 0600) != 0 || setenv(var, fifo, 1) != 0) {
		perror("forkstart: mkfifo");
		return 2;
	}
	if (!(libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL))) {
		printf("forkstart: %s\n", dlerror());
		return 2;
	}
	pthread_t t;
	if (pthread_create(&t, NULL, first_lookup, NULL) != 0)
		return 2;
	/* Opens once the constructor has opened the FIFO: start-up is under way. */
	int w = -1;
	for (int i = 0; i < 500 && w < 0; i++)
		if ((w = open(fifo, O_WRONLY | O_NONBLOCK)) < 0)
			usleep(10000);
	if (w < 0) {
		puts("forkstart: the shim never reached CTXGUARD_CUPTI's hold");
		return 2;
	}
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		close(w);
		alarm(3);
		void *p = dlsym(libcuda, "cuLaunchKernel");
		printf("forkstart: child's lookup %s\n", p ? "returned" : "failed");
		fflush(stdout);
		_exit(p ? 0 : 1);
	}
	close(w);
	int st = 0;
	waitpid(child, &st, 0);
	pthread_join(t, NULL);
	unlink(fifo);
	if (WIFSIGNALED(st)) {
		printf("forkstart: the child hung (killed by signal %d)\n", WTERMSIG(st));
		return 1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("forkstart: the child failed (status %#x)\n", st);
		return 1;
	}
	puts("forkstart: ok");
	return 0;
}
