#include "ipam/helper_exec.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "base/write_all.h"
#include "cluster/helper_protocol.h"

extern char** environ;

namespace shmipam::ipam {

namespace {

// Writes the helper's request: a helper that died before reading must not kill the plugin with
// SIGPIPE.
void write_ignoring_sigpipe(int fd, const std::string& input) {
    struct sigaction ignore {
    }, before{};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &before);
    (void)write_all(fd, input);
    ::sigaction(SIGPIPE, &before, nullptr);
}

}  // namespace

std::string helper_beside_plugin(const std::string& name) {
    char self[PATH_MAX] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = n > 0 ? std::string(self, size_t(n)) : std::string();
    dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
    return dir + "/" + name;
}

std::string helper_path(const ClusterMode& cm) {
    return cm.helper.empty() ? helper_beside_plugin("shmipam-cluster") : cm.helper;
}

Expected<std::string> run_helper(const std::string& path, const std::string& input, int lock_fd,
                                 const char* config_key) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0)
        return make_error(Code::kIo, "pipe: " + std::string(std::strerror(errno)));
    if (::pipe2(out, O_CLOEXEC) != 0) {
        ::close(in[0]);
        ::close(in[1]);
        return make_error(Code::kIo, "pipe: " + std::string(std::strerror(errno)));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    if (lock_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, lock_fd, cluster::protocol::kHandedLockFd);
    char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
        ::close(in[1]);
        ::close(out[0]);
        return make_error(Code::kIo, "cannot run the helper " + path + ": " + std::strerror(rc) +
                                         " (shmipamctl install puts it beside the plugin; or set " +
                                         config_key + ")");
    }
    write_ignoring_sigpipe(in[1], input);
    ::close(in[1]);
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        text.append(buf, size_t(n));
    }
    ::close(out[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
        return make_error(Code::kInternal, "the helper " + path + " was killed by signal " +
                                               std::to_string(WTERMSIG(status)));
    }
    if (text.empty()) {
        return make_error(Code::kInternal, "the helper " + path + " answered nothing",
                          "exit status " + std::to_string(WEXITSTATUS(status)));
    }
    return text;
}

void spawn_detached(const std::string& path, const std::string& input, int lock_fd) {
    int in[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    if (lock_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, lock_fd,
                                         cluster::protocol::kHandedLockFd);  // clears FD_CLOEXEC
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, path.c_str(), &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    if (rc == 0) write_ignoring_sigpipe(in[1], input);
    ::close(in[1]);
}

}  // namespace shmipam::ipam
