/* Syscall attacks for the containment suite. Run ONLY through guard.py, inside the
 * sandbox. Exit 0: blocked with an expected errno; 1: the call succeeded; 2: it failed
 * with an unexpected errno (printed). Arch attacks expect to be killed (SIGSYS). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int verdict(const char *name, long rc, int ok1, int ok2) {
    if (rc >= 0) { printf("%s: SUCCEEDED (%ld)\n", name, rc); return 1; }
    int e = errno;
    printf("%s: errno %d (%s)\n", name, e, strerror(e));
    return (e == ok1 || e == ok2) ? 0 : 2;
}

int main(int argc, char **argv) {
    if (argc < 2) return 3;
    const char *a = argv[1];
    if (!strcmp(a, "mount"))
        return verdict(a, mount("tmpfs", "/tmp", "tmpfs", 0, NULL), EPERM, 0);
    if (!strcmp(a, "umount"))
        return verdict(a, umount2("/proc", MNT_DETACH), EPERM, 0);
    if (!strcmp(a, "unshare_user"))
        return verdict(a, unshare(CLONE_NEWUSER), EPERM, 0);
    if (!strcmp(a, "unshare_ns"))
        return verdict(a, unshare(CLONE_NEWNS), EPERM, 0);
    if (!strcmp(a, "setns")) {
        int fd = open("/proc/self/ns/net", O_RDONLY);
        return verdict(a, setns(fd, 0), EPERM, 0);
    }
    if (!strcmp(a, "clone_newuser"))
        return verdict(a, syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0), EPERM, 0);
    if (!strcmp(a, "clone3")) {
        struct clone_args ca; memset(&ca, 0, sizeof ca);
        ca.flags = CLONE_NEWUSER; ca.exit_signal = SIGCHLD;
        return verdict(a, syscall(SYS_clone3, &ca, sizeof ca), ENOSYS, 0);
    }
    if (!strcmp(a, "init_module"))
        return verdict(a, syscall(SYS_init_module, "x", 1, ""), EPERM, 0);
    if (!strcmp(a, "finit_module"))
        return verdict(a, syscall(SYS_finit_module, 0, "", 0), EPERM, 0);
    if (!strcmp(a, "bpf"))
        return verdict(a, syscall(SYS_bpf, 0, NULL, 0), EPERM, 0);
    if (!strcmp(a, "perf_event_open"))
        return verdict(a, syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM, 0);
    if (!strcmp(a, "keyctl"))  /* KEYCTL_GET_KEYRING_ID of the session keyring */
        return verdict(a, syscall(SYS_keyctl, 0, -3, 1), EPERM, 0);
    if (!strcmp(a, "add_key"))
        return verdict(a, syscall(SYS_add_key, "user", "k", "v", 1, -3), EPERM, 0);
    if (!strcmp(a, "userfaultfd"))
        return verdict(a, syscall(SYS_userfaultfd, 0), EPERM, 0);
    if (!strcmp(a, "io_uring_setup")) {
        char params[120]; memset(params, 0, sizeof params);
        return verdict(a, syscall(SYS_io_uring_setup, 4, params), EPERM, 0);
    }
    if (!strcmp(a, "ptrace"))
        return verdict(a, ptrace(PTRACE_TRACEME, 0, 0, 0), EPERM, 0);
    if (!strcmp(a, "process_vm_readv"))
        return verdict(a, syscall(SYS_process_vm_readv, getppid(), NULL, 0, NULL, 0, 0),
                       EPERM, 0);
    if (!strcmp(a, "personality"))
        return verdict(a, personality(ADDR_NO_RANDOMIZE), EPERM, 0);
    if (!strcmp(a, "personality_high"))  /* PER_LINUX with garbage in the upper bits */
        return verdict(a, syscall(SYS_personality, 0x100000000UL | ADDR_NO_RANDOMIZE),
                       EPERM, 0);
    if (!strcmp(a, "personality_query")) { /* must still work */
        long r = syscall(SYS_personality, 0xffffffffUL);
        printf("query -> %ld\n", r);
        return r < 0 ? 2 : 0;
    }
    /* With no filter these would fail with EBADF (fd -1); the filter answers EPERM. */
    if (!strcmp(a, "tiocsti")) {
        char c = 'x';
        return verdict(a, ioctl(-1, TIOCSTI, &c), EPERM, 0);
    }
    if (!strcmp(a, "tiocsti_high")) {  /* upper 32 bits set: the kernel ignores them */
        char c = 'x';
        return verdict(a, syscall(SYS_ioctl, -1, 0xdead00000000UL | TIOCSTI, &c), EPERM, 0);
    }
    if (!strcmp(a, "tioclinux")) {
        char c = 0;
        return verdict(a, ioctl(-1, TIOCLINUX, &c), EPERM, 0);
    }
    if (!strcmp(a, "sock_packet"))
        return verdict(a, socket(AF_PACKET, SOCK_RAW, 0), EPERM, 0);
    if (!strcmp(a, "sock_alg"))
        return verdict(a, socket(AF_ALG, SOCK_SEQPACKET, 0), EPERM, 0);
    if (!strcmp(a, "sock_vsock"))
        return verdict(a, socket(AF_VSOCK, SOCK_STREAM, 0), EPERM, 0);
    if (!strcmp(a, "sock_raw"))
        return verdict(a, socket(AF_INET, SOCK_RAW, 1), EPERM, 0);
    if (!strcmp(a, "x32")) {  /* getpid through the x32 ABI: bit 0x40000000 */
        long r = syscall(0x40000000L | SYS_getpid);
        printf("x32 getpid returned %ld errno %d\n", r, errno);
        return 1;
    }
    if (!strcmp(a, "i386")) {  /* getpid (20) through int 0x80, the i386 ABI */
        long r;
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
        printf("int80 getpid returned %ld\n", r);
        return 1;
    }
    return 3;
}
