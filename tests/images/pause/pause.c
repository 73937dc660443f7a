/*
 * The pod sandbox ("pause") process for the test cluster: PID 1 of every pod's sandbox.
 * It holds the pod's namespaces open, reaps any child that is re-parented to it, and exits 0
 * on SIGTERM or SIGINT (what the kubelet and containerd send when a pod is torn down).
 * Built statically so the image needs no libc.
 */
#include <errno.h>
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
    int saved = errno;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

static int handle(int sig, void (*fn)(int), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts("pause (stunner-gateway-operator-rs test images)");
        return 0;
    }
    if (getpid() != 1) {
        fprintf(stderr, "pause: warning: not PID 1, orphans will not be reaped here\n");
    }
    if (handle(SIGINT, on_stop, 0) || handle(SIGTERM, on_stop, 0) ||
        handle(SIGCHLD, on_child, SA_NOCLDSTOP | SA_RESTART)) {
        perror("pause: sigaction");
        return 1;
    }
    for (;;) {
        pause();
    }
}
