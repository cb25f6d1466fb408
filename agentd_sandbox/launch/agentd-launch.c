/*
 * agentd-launch: the sandbox chain in front of bwrap in one exec (see launcher.py).
 *
 * It does, in this order, what `sh` (the control group), `nsenter` (the session's
 * network), `setpriv --pdeathsig`, `unshare --pid --kill-child`, `setpriv` (the identity)
 * and `prlimit` did, each of them an exec of its own:
 *
 *   agentd-launch [--cgroup PROCS]... [--netns PATH] [--pidns]
 *                 [--uid UID --gid GID [--groups G,G,...]] [--rlimit NAME=SOFT:HARD]...
 *                 -- PROGRAM [ARG]...
 *
 *   1. parent-death signal SIGKILL (it dies with its spawner);
 *   2. each PROCS file (a cgroup.procs) gets "0": this process joins the group, with the
 *      spawner's privileges, before anything of the sandbox runs. A single group on
 *      cgroup v2 with --pidns is not joined: the child of step 4 is made in it
 *      (clone3 CLONE_INTO_CGROUP), which needs no migration (on a quiet machine the
 *      first migration waits for an RCU grace period, 10-20 ms); where clone3 cannot,
 *      this process joins as above, then forks;
 *   3. setns into the network namespace kept at PATH;
 *   4. --pidns: unshare(CLONE_NEWPID) and fork; this process stays as the child's parent
 *      (as unshare did: SIGINT and SIGTERM blocked, it exits as the child did, a death
 *      by signal repeated on itself) and the child, pid 1 of the new namespace, dies
 *      with it (its parent-death signal), taking the namespace with it;
 *   5. the identity: supplementary groups (none unless --groups), gid, uid, all three
 *      of real, effective and saved, checked;
 *   6. the rlimits, as the identity;
 *   7. no_new_privs; the parent-death signal again (a change of credentials clears it),
 *      then a check that the parent still lives (a pipe whose write end only it holds);
 *   8. every signal at its default and unblocked; exec PROGRAM with the environment as
 *      given.
 *
 * A step that fails says so in one line on stderr and exits 125 before anything runs;
 * an exec that fails exits 127. Nothing here reads what a sandbox could write: the
 * arguments are the daemon's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define STEP_EXIT 125
#define EXEC_EXIT 127
#define MAX_ITEMS 64

extern char **environ;

struct rlim {
    int resource;
    rlim_t soft, hard;
};

static void fail(const char *what, const char *detail) {
    if (detail)
        dprintf(2, "agentd: %s (%s): %s\n", what, detail, strerror(errno));
    else
        dprintf(2, "agentd: %s: %s\n", what, strerror(errno));
    _exit(STEP_EXIT);
}

static void usage(const char *why) {
    dprintf(2, "agentd-launch: %s\n", why);
    _exit(STEP_EXIT);
}

static unsigned long number(const char *text, const char *what) {
    char *end;
    errno = 0;
    if (!*text || *text == '-')
        usage(what);
    unsigned long value = strtoul(text, &end, 10);
    if (errno || *end)
        usage(what);
    return value;
}

static int resource_named(const char *name, size_t len) {
    static const struct {
        const char *name;
        int resource;
    } names[] = {
        {"core", RLIMIT_CORE},   {"nproc", RLIMIT_NPROC},   {"data", RLIMIT_DATA},
        {"fsize", RLIMIT_FSIZE}, {"nofile", RLIMIT_NOFILE}, {"cpu", RLIMIT_CPU},
        {"as", RLIMIT_AS},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i].name) == len && !strncmp(names[i].name, name, len))
            return names[i].resource;
    usage("--rlimit: unknown resource");
    return -1;
}

/* NAME=SOFT:HARD */
static struct rlim parse_rlimit(const char *text) {
    struct rlim r;
    const char *eq = strchr(text, '=');
    if (!eq)
        usage("--rlimit wants NAME=SOFT:HARD");
    r.resource = resource_named(text, (size_t)(eq - text));
    char soft[32];
    const char *colon = strchr(eq + 1, ':');
    if (!colon || (size_t)(colon - eq - 1) >= sizeof soft)
        usage("--rlimit wants NAME=SOFT:HARD");
    memcpy(soft, eq + 1, (size_t)(colon - eq - 1));
    soft[colon - eq - 1] = 0;
    r.soft = number(soft, "--rlimit: bad soft limit");
    r.hard = number(colon + 1, "--rlimit: bad hard limit");
    if (r.soft > r.hard)
        usage("--rlimit: soft above hard");
    return r;
}

static size_t parse_groups(const char *text, gid_t *out) {
    size_t n = 0;
    char copy[4096];
    if (strlen(text) >= sizeof copy)
        usage("--groups: too long");
    strcpy(copy, text);
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        if (n == MAX_ITEMS)
            usage("--groups: too many");
        out[n] = (gid_t)number(item, "--groups: bad gid");
        if (out[n] == 0)
            usage("--groups: refusing gid 0");
        n++;
    }
    return n;
}

static void close_all_but(int keep) {
    /* close_range(2) (Linux 5.9); one close per descriptor where it is missing */
    if (keep > 0 && syscall(SYS_close_range, 0U, (unsigned)keep - 1, 0U) == 0 &&
        syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0U) == 0)
        return;
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = 0; fd < (max > 0 ? max : 1024); fd++)
        if (fd != keep)
            close(fd);
}

static void join(const char *procs) {
    int fd = open(procs, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || write(fd, "0", 1) != 1)
        fail("cannot join the session's control group", procs);
    close(fd);
}

/* The directory of `procs` if it is a group on cgroup v2 (its fd), else -1. */
static int v2_group(const char *procs) {
    char dir[PATH_MAX];
    const char *slash = strrchr(procs, '/');
    struct statfs fs;
    if (!slash || (size_t)(slash - procs) >= sizeof dir || strcmp(slash, "/cgroup.procs"))
        return -1;
    memcpy(dir, procs, (size_t)(slash - procs));
    dir[slash - procs] = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    if (fstatfs(fd, &fs) < 0 || fs.f_type != CGROUP2_SUPER_MAGIC) {
        close(fd);
        return -1;
    }
    return fd;
}

/* fork(), the child made in the group `group_fd` is the directory of (-1: where this
 * process is); falls back to joining `procs`, then fork, where clone3 cannot. */
static pid_t fork_into(int group_fd, const char *procs) {
    if (group_fd >= 0) {
        struct clone_args args;
        memset(&args, 0, sizeof args);
        args.flags = CLONE_INTO_CGROUP;
        args.exit_signal = SIGCHLD;
        args.cgroup = (unsigned)group_fd;
        long pid = syscall(SYS_clone3, &args, sizeof args);
        if (pid >= 0)
            return (pid_t)pid;
        join(procs);
    }
    return fork();
}

/* The parent of the namespace's pid 1: waits, then ends as its child did. */
static void wait_as_parent(pid_t child, int alive_w) {
    int status;
    close_all_but(alive_w);
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            _exit(STEP_EXIT);
    if (WIFEXITED(status))
        _exit(WEXITSTATUS(status));
    int sig = WTERMSIG(status);
    if (sig != SIGKILL) {
        sigset_t set;
        signal(sig, SIG_DFL);
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
    }
    kill(getpid(), sig);
    _exit(128 + sig);
}

int main(int argc, char **argv) {
    const char *cgroups[MAX_ITEMS];
    size_t n_cgroups = 0, n_rlimits = 0, n_groups = 0;
    struct rlim rlimits[MAX_ITEMS];
    gid_t groups[MAX_ITEMS];
    const char *netns = NULL;
    int pidns = 0, have_uid = 0, have_gid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    int i = 1;

    for (; i < argc; i++) {
        const char *arg = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(arg, "--"))
            break;
        if (!strcmp(arg, "--pidns")) {
            pidns = 1;
            continue;
        }
        if (!next)
            usage("an option without its value");
        i++;
        if (!strcmp(arg, "--cgroup")) {
            if (n_cgroups == MAX_ITEMS)
                usage("--cgroup: too many");
            cgroups[n_cgroups++] = next;
        } else if (!strcmp(arg, "--netns")) {
            netns = next;
        } else if (!strcmp(arg, "--uid")) {
            uid = (uid_t)number(next, "--uid: bad uid");
            have_uid = 1;
        } else if (!strcmp(arg, "--gid")) {
            gid = (gid_t)number(next, "--gid: bad gid");
            have_gid = 1;
        } else if (!strcmp(arg, "--groups")) {
            n_groups = parse_groups(next, groups);
        } else if (!strcmp(arg, "--rlimit")) {
            if (n_rlimits == MAX_ITEMS)
                usage("--rlimit: too many");
            rlimits[n_rlimits++] = parse_rlimit(next);
        } else {
            usage("unknown option");
        }
    }
    if (i >= argc - 1)
        usage("no program after --");
    if (have_uid != have_gid)
        usage("--uid and --gid go together");
    if (have_uid && (uid == 0 || gid == 0))
        usage("refusing to run as uid or gid 0");
    char **program = argv + i + 1;

    pid_t spawner = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        fail("cannot arm the parent-death signal", NULL);
    if (getppid() != spawner)
        _exit(STEP_EXIT); /* the spawner died before the signal was armed */

    int group_fd = pidns && n_cgroups == 1 ? v2_group(cgroups[0]) : -1;
    for (size_t k = 0; k < n_cgroups && group_fd < 0; k++)
        join(cgroups[k]);
    if (netns) {
        int fd = open(netns, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
            fail("cannot join the session's network namespace", netns);
        close(fd);
    }

    int alive_r = -1;
    if (pidns) {
        sigset_t blocked, old;
        int alive[2];
        sigemptyset(&blocked);
        sigaddset(&blocked, SIGINT);
        sigaddset(&blocked, SIGTERM);
        sigprocmask(SIG_BLOCK, &blocked, &old);
        if (unshare(CLONE_NEWPID) < 0)
            fail("cannot make the sandbox's pid namespace", NULL);
        if (pipe2(alive, O_CLOEXEC) < 0)
            fail("cannot make a pipe", NULL);
        pid_t child = fork_into(group_fd, group_fd >= 0 ? cgroups[0] : NULL);
        if (child < 0)
            fail("cannot fork", NULL);
        if (child > 0) {
            close(alive[0]);
            wait_as_parent(child, alive[1]);
        }
        if (group_fd >= 0)
            close(group_fd);
        close(alive[1]);
        alive_r = alive[0];
        sigprocmask(SIG_SETMASK, &old, NULL);
    }

    if (have_uid) {
        uid_t r, e, s;
        gid_t rg, eg, sg;
        if (setgroups(n_groups, groups) < 0)
            fail("cannot set the sandbox's groups", NULL);
        if (setresgid(gid, gid, gid) < 0)
            fail("cannot drop to the sandbox's gid", NULL);
        if (setresuid(uid, uid, uid) < 0)
            fail("cannot drop to the sandbox's uid", NULL);
        if (getresuid(&r, &e, &s) < 0 || r != uid || e != uid || s != uid ||
            getresgid(&rg, &eg, &sg) < 0 || rg != gid || eg != gid || sg != gid) {
            errno = EPERM;
            fail("the drop to the sandbox's identity did not hold", NULL);
        }
    }
    for (size_t k = 0; k < n_rlimits; k++) {
        struct rlimit value = {rlimits[k].soft, rlimits[k].hard};
        if (setrlimit(rlimits[k].resource, &value) < 0)
            fail("cannot set the sandbox's limits", NULL);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        fail("cannot set no_new_privs", NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        fail("cannot arm the parent-death signal", NULL);
    if (alive_r >= 0) {
        struct pollfd parent = {alive_r, POLLIN, 0};
        if (poll(&parent, 1, 0) != 0)
            _exit(STEP_EXIT); /* hung up: the parent is gone */
        close(alive_r);
    }

    sigset_t none;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(program[0], program, environ);
    dprintf(2, "agentd: cannot start %s: %s\n", program[0], strerror(errno));
    _exit(EXEC_EXIT);
}
