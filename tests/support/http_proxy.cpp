#include "tests/support/http_proxy.h"

#include <signal.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <vector>

#include "tests/support/test_ports.h"

namespace shmipam::testing {

namespace {

constexpr const char* kTinyproxy = "/usr/bin/tinyproxy";  // Debian's (scripts/install-deps.sh)
// tinyproxy starts in milliseconds; the bound is for a loaded CI machine.
constexpr int kStartTimeoutMs = 15'000;

}  // namespace

HttpProxy::HttpProxy() {
    if (::access(kTinyproxy, X_OK) != 0) {
        why_ = std::string("no ") + kTinyproxy + " (scripts/install-deps.sh installs it)";
        return;
    }
    for (int attempt = 1; attempt <= kPortAttempts; ++attempt) {
        port_ = reserve_port(&why_);
        if (port_ == 0) return;
        const std::string config = dir_.sub("tinyproxy.conf");
        // No ConnectPort line: CONNECT to any port (the stand-in's is a reserved one). Its log
        // goes to a file, so that nothing fills the pipes of its output meanwhile.
        write_file(config, "Port " + std::to_string(port_) +
                               "\nListen 127.0.0.1\nTimeout 30\nMaxClients 50\n"
                               "Allow 127.0.0.1\nLogLevel Connect\nLogFile \"" +
                               dir_.sub("tinyproxy.log") + "\"\n");
        auto child =
            std::make_unique<Child>(std::vector<std::string>{kTinyproxy, "-d", "-c", config},
                                    std::map<std::string, std::string>{}, "");
        const Listening up = wait_listening(port_, child->pid(), kStartTimeoutMs);
        if (up == Listening::kYes) {
            proxy_ = std::move(child);
            return;
        }
        if (up == Listening::kTimedOut) ::kill(child->pid(), SIGKILL);
        const ProcessResult gone = child->wait();
        why_ = "tinyproxy did not listen on port " + std::to_string(port_) + ": " + gone.out +
               gone.err;
        // One that exited first found its port taken after all: another port.
        if (up == Listening::kTimedOut) return;
    }
}

HttpProxy::~HttpProxy() {
    if (!proxy_) return;
    ::kill(proxy_->pid(), SIGTERM);
    proxy_->wait();
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
