/* The sandbox ("pause") process of the containerd suite's pod sandboxes (tests/cri).
 *
 * Nothing can be pulled on the test machines, so containerd's `sandbox_image` is an image the
 * suite makes itself (tests/cri/oci_image.py) from this one static binary. It does what
 * Kubernetes' pause container does: it is the sandbox's first process, holding its namespaces
 * open; it reaps any child that ends (it is the pid namespace's init); it exits 0 on SIGINT or
 * SIGTERM (StopPodSandbox) and otherwise waits in pause().
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
    (void)sig;
    _exit(0);
}

static void on_child(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        printf("shmipam test pause\n");
        return 0;
    }
    if (getpid() != 1) fprintf(stderr, "pause: warning: not the first process of its namespace\n");

    struct sigaction stop;
    memset(&stop, 0, sizeof stop);
    stop.sa_handler = on_stop;
    if (sigaction(SIGINT, &stop, NULL) != 0 || sigaction(SIGTERM, &stop, NULL) != 0) return 1;

    struct sigaction child;
    memset(&child, 0, sizeof child);
    child.sa_handler = on_child;
    child.sa_flags = SA_NOCLDSTOP;
    if (sigaction(SIGCHLD, &child, NULL) != 0) return 2;

    for (;;) pause();
    return 42; /* never reached */
}
