#include "ipam/helper_exec.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "base/elf_interpreter.h"
#include "base/shipped_libraries.h"
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

std::string directory_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The ld.so exit status when it cannot load a program or one of its libraries (its message goes
// to the helper's stderr, which is the plugin's: the runtime's log).
constexpr int kLoaderFailedStatus = 127;

// Why posix_spawn of `launch` failed, in words that say what to fix.
std::string spawn_failure(const std::string& path, const HelperLaunch& launch, int rc,
                          const char* config_key) {
    if (launch.through_shipped_loader) {
        return "cannot start the helper " + path + " through " + launch.file + ": " +
               std::strerror(rc) + " (shmipamctl install puts the helpers and " + kShippedLibDir +
               "/ beside the plugin)";
    }
    if (rc == ENOENT && ::access(path.c_str(), F_OK) == 0) {
        const auto interpreter = elf_interpreter(path);
        return "the helper " + path + " is there but cannot be started: its dynamic loader " +
               (interpreter ? *interpreter : std::string("(unreadable)")) +
               " is not on this host, and there is no " + kShippedLibDir + "/" + kShippedLoader +
               " beside it to start it with (shmipamctl install puts the helpers with their " +
               "libraries and loader; or set " + config_key + " to a helper built for this host)";
    }
    return "cannot run the helper " + path + ": " + std::strerror(rc) +
           " (shmipamctl install puts it beside the plugin; or set " + config_key + ")";
}

// argv as posix_spawn takes it; points into `strings`.
std::vector<char*> c_argv(const std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

}  // namespace

HelperLaunch helper_launch(const std::string& path) {
    const std::string lib_dir = directory_of(path) + "/" + kShippedLibDir;
    const std::string loader = lib_dir + "/" + kShippedLoader;
    if (::access(loader.c_str(), X_OK) != 0) return {path, {path}, false};
    return {loader,
            {loader, "--inhibit-cache", "--library-path", lib_dir, "--argv0", path, path},
            true};
}

std::string helper_beside_plugin(const std::string& name) {
    char self[PATH_MAX] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    return directory_of(n > 0 ? std::string(self, size_t(n)) : std::string()) + "/" + name;
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
    const HelperLaunch launch = helper_launch(path);
    std::vector<char*> argv = c_argv(launch.argv);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, launch.file.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
        ::close(in[1]);
        ::close(out[0]);
        return make_error(Code::kIo, spawn_failure(path, launch, rc, config_key));
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
    if (text.empty() && launch.through_shipped_loader && WIFEXITED(status) &&
        WEXITSTATUS(status) == kLoaderFailedStatus) {
        return make_error(Code::kInternal,
                          "the helper " + path + " could not be loaded by " + launch.file +
                              ": a library it needs is missing or damaged in " + kShippedLibDir +
                              "/ (install the plugin, its helpers and " + kShippedLibDir +
                              "/ from one release with shmipamctl install)",
                          "exit status 127; the loader's message is on the plugin's stderr");
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
    const HelperLaunch launch = helper_launch(path);
    std::vector<char*> argv = c_argv(launch.argv);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, launch.file.c_str(), &fa, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    if (rc == 0) write_ignoring_sigpipe(in[1], input);
    ::close(in[1]);
}

}  // namespace shmipam::ipam
