#include "tests/support/http_proxy.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <sstream>
#include <vector>

#include "tests/support/test_ports.h"

extern char** environ;

namespace shmipam::testing {

namespace {

constexpr const char* kTinyproxy = "/usr/bin/tinyproxy";  // Debian's (scripts/install-deps.sh)
// tinyproxy starts in milliseconds; the bound is for a loaded CI machine.
constexpr int kStartTimeoutMs = 15'000;

}  // namespace

HttpProxy::HttpProxy() {
    for (int attempt = 0; attempt < kPortAttempts; ++attempt) {
        port_ = reserve_port(&why_);
        if (port_ == 0) return;
        const std::string config = dir_.sub("tinyproxy.conf");
        // No ConnectPort line: CONNECT to any port (the stand-in's is a reserved one).
        write_file(config, "Port " + std::to_string(port_) +
                               "\nListen 127.0.0.1\nTimeout 30\nMaxClients 50\n"
                               "Allow 127.0.0.1\nLogLevel Connect\nLogFile \"" +
                               dir_.sub("tinyproxy.log") + "\"\n");
        std::vector<std::string> args = {kTinyproxy, "-d", "-c", config};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        const std::string out = dir_.sub("tinyproxy.out");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        posix_spawn_file_actions_addopen(&fa, 2, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        const int rc = posix_spawn(&pid_, kTinyproxy, &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0) {
            pid_ = -1;
            why_ =
                std::string("cannot run ") + kTinyproxy + " (scripts/install-deps.sh installs it)";
            return;
        }
        switch (wait_listening(port_, pid_, kStartTimeoutMs)) {
            case Listening::kYes:
                return;
            case Listening::kExited: {
                int status = 0;
                ::waitpid(pid_, &status, 0);
                pid_ = -1;
                why_ = "tinyproxy exited before it listened: " + read_file(out);
                continue;  // its port taken after all: another one
            }
            case Listening::kTimedOut:
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, nullptr, 0);
                pid_ = -1;
                why_ = "tinyproxy did not listen within " + std::to_string(kStartTimeoutMs) +
                       " ms: " + read_file(out);
                return;
        }
    }
}

HttpProxy::~HttpProxy() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
}

size_t HttpProxy::tunnels_to(const std::string& host_port) const {
    // tinyproxy's LogLevel Connect writes "Request (file descriptor N): CONNECT HOST:PORT
    // HTTP/1.1" for each tunnel asked of it.
    std::istringstream log(read_file(dir_.sub("tinyproxy.log")));
    size_t n = 0;
    for (std::string line; std::getline(log, line);) {
        if (line.find(": CONNECT " + host_port + " ") != std::string::npos) ++n;
    }
    return n;
}

}  // namespace shmipam::testing
