#include "bench/exec_spawner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <numeric>

namespace shmipam::bench {

ExecResult spawn_and_wait(const std::string& binary, const std::map<std::string, std::string>& env,
                          const std::string& input) {
    // A plugin may exit without reading its stdin (/bin/true as the floor does): our write must
    // fail with EPIPE, not kill us.
    static const bool sigpipe_ignored = [] { return ::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
    (void)sigpipe_ignored;
    ExecResult r;
    int in_pipe[2], out_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) return r;
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
        ::close(in_pipe[0]);
        ::close(in_pipe[1]);
        return r;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string bin = binary;
    char* argv[] = {bin.data(), nullptr};
    const auto t0 = std::chrono::steady_clock::now();
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    if (rc == 0) {
        size_t off = 0;
        while (off < input.size()) {
            ssize_t n = ::write(in_pipe[1], input.data() + off, input.size() - off);
            if (n <= 0) break;
            off += size_t(n);
        }
    }
    ::close(in_pipe[1]);
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(out_pipe[0], buf, sizeof buf);
        if (n > 0) {
            r.out.append(buf, size_t(n));
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            break;
        }
    }
    ::close(out_pipe[0]);
    if (rc != 0) return r;
    int status = 0;
    struct rusage ru {};
    while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    const auto t1 = std::chrono::steady_clock::now();
    r.micros = std::chrono::duration<double, std::micro>(t1 - t0).count();
    r.cpu_micros = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
                   double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

Percentiles percentiles(std::vector<double> s) {
    Percentiles p;
    if (s.empty()) return p;
    std::sort(s.begin(), s.end());
    auto at = [&](double q) { return s[std::min(s.size() - 1, size_t(q * double(s.size())))]; };
    p.p50 = at(0.50);
    p.p90 = at(0.90);
    p.p99 = at(0.99);
    p.max = s.back();
    p.mean = std::accumulate(s.begin(), s.end(), 0.0) / double(s.size());
    return p;
}

}  // namespace shmipam::bench
