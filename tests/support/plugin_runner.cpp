#include "tests/support/plugin_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

extern char** environ;

namespace shmipam::testing {

namespace {

std::string drain(int fd) {
    std::string s;
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
            s.append(buf, size_t(n));
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            break;
        }
    }
    return s;
}

}  // namespace

nlohmann::json ProcessResult::json() const {
    return nlohmann::json::parse(out, nullptr, false);
}

Child::Child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             const std::string& input) {
    int in_pipe[2], out_pipe[2], err_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) || ::pipe2(out_pipe, O_CLOEXEC) ||
        ::pipe2(err_pipe, O_CLOEXEC)) {
        throw std::runtime_error("pipe failed");
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    if (env.find("PATH") == env.end()) env_strings.push_back("PATH=/usr/sbin:/usr/bin:/sbin:/bin");
    std::vector<char*> envp, av;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = argv;
    for (auto& s : args) av.push_back(s.data());
    av.push_back(nullptr);
    int rc = posix_spawn(&pid_, av[0], &fa, nullptr, av.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + " failed");
    // Configs are small (< pipe buffer), so writing all of it before reading cannot deadlock.
    size_t off = 0;
    signal(SIGPIPE, SIG_IGN);
    while (off < input.size()) {
        ssize_t n = ::write(in_pipe[1], input.data() + off, input.size() - off);
        if (n <= 0) break;
        off += size_t(n);
    }
    ::close(in_pipe[1]);
    out_fd_ = out_pipe[0];
    err_fd_ = err_pipe[0];
}

ProcessResult Child::wait() {
    ProcessResult r;
    // Read both pipes until EOF (stderr is small; read stdout first, then stderr).
    r.out = drain(out_fd_);
    r.err = drain(err_fd_);
    ::close(out_fd_);
    ::close(err_fd_);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r.signal = WTERMSIG(status);
    }
    return r;
}

ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env, const std::string& input) {
    return Child(argv, env, input).wait();
}

std::map<std::string, std::string> cni_env(const std::string& command,
                                           const std::string& container_id,
                                           const std::string& ifname, const std::string& args) {
    std::map<std::string, std::string> env{{"CNI_COMMAND", command},
                                           {"CNI_CONTAINERID", container_id},
                                           {"CNI_NETNS", "/var/run/netns/test"},
                                           {"CNI_IFNAME", ifname},
                                           {"CNI_PATH", "/usr/lib/cni"}};
    if (!args.empty()) env["CNI_ARGS"] = args;
    return env;
}

ProcessResult run_plugin(const std::map<std::string, std::string>& env, const std::string& config) {
    return run_process({SHMIPAM_PLUGIN_PATH}, env, config);
}

ProcessResult run_ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv{SHMIPAMCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, {}, "");
}

nlohmann::json make_config(const std::string& dir, const std::string& name,
                           const std::string& version, const std::string& subnet) {
    return {{"cniVersion", version},
            {"name", name},
            {"type", "bridge"},
            {"bridge", "cni0"},
            {"ipam",
             {{"type", "shmipam"},
              {"runDir", dir + "/run"},
              {"dataDir", dir + "/data"},
              {"reuseDelay", 0},
              {"ranges", {{{{"subnet", subnet}}}}}}}};
}

}  // namespace shmipam::testing
