#include "tests/support/etcd_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "cluster/etcd_client.h"
#include "tests/support/test_ports.h"

extern char** environ;

namespace shmipam::testing {

namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";
constexpr const char* kEtcdctl = "/usr/bin/etcdctl";
// How long a member started again on an empty data directory may take to answer /health.
constexpr int kRebuildHealthyMs = 20'000;
// How long a new member may take to answer /health: etcd's start-up and first election, on a
// loaded machine.
constexpr int kNewHealthyMs = 30'000;
// A new cluster whose member could not bind its port (taken by a process outside the tests'
// port protocol, tests/support/test_ports.h) is started again on new ports this many times in
// all: two clashes in a row would mean a port thief the protocol cannot avoid.
constexpr int kBindAttempts = 3;

std::string url(uint16_t port, bool tls = false) {
    return std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port);
}

// Runs a command, its output into `log`; true when it exits 0.
bool run(std::vector<std::string> args, const std::string& log) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    pid_t pid = -1;
    const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return false;
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

bool EtcdCluster::installed() {
    return ::access(kEtcd, X_OK) == 0;
}

bool EtcdCluster::make_certificates() {
    const std::string log = dir_.sub("openssl.log");
    const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt",
                                         "ec_paramgen_curve:prime256v1", "-nodes"};
    auto with_ec = [&](std::vector<std::string> head, std::vector<std::string> tail) {
        head.insert(head.end(), ec.begin(), ec.end());
        head.insert(head.end(), tail.begin(), tail.end());
        return head;
    };
    auto self_signed = [&](const std::string& name) {
        return run(with_ec({"openssl", "req", "-x509"},
                           {"-keyout", dir_.sub(name + ".key"), "-out", dir_.sub(name + ".crt"),
                            "-days", "2", "-subj", "/CN=shmipam test " + name}),
                   log);
    };
    auto signed_by_ca = [&](const std::string& name, const std::string& cn,
                            const std::string& ext) {
        write_file(dir_.sub(name + ".ext"), ext);
        return run(with_ec({"openssl", "req", "-new"},
                           {"-keyout", dir_.sub(name + ".key"), "-out", dir_.sub(name + ".csr"),
                            "-subj", "/CN=" + cn}),
                   log) &&
               run({"openssl", "x509", "-req", "-in", dir_.sub(name + ".csr"), "-CA",
                    dir_.sub("ca.crt"), "-CAkey", dir_.sub("ca.key"), "-CAcreateserial", "-out",
                    dir_.sub(name + ".crt"), "-days", "2", "-extfile", dir_.sub(name + ".ext")},
                   log);
    };
    return self_signed("ca") && self_signed("other-ca") &&
           signed_by_ca("server", "127.0.0.1",
                        "subjectAltName=IP:127.0.0.1,DNS:" + std::string(kHostName) +
                            "\nextendedKeyUsage=serverAuth,clientAuth\n") &&
           signed_by_ca("client", "shmipam-node", "extendedKeyUsage=clientAuth\n");
}

EtcdCluster::EtcdCluster(size_t members, bool tls, std::vector<std::string> extra)
    : tls_(tls), extra_(std::move(extra)) {
    std::random_device rd;
    token_ = "shmipam-test-" + std::to_string(rd()) + std::to_string(::getpid());
    if (!installed()) {
        why_ = std::string(kEtcd) + " is not installed (scripts/install-deps.sh installs it)";
        return;
    }
    if (tls_ && !make_certificates()) {
        why_ = "cannot make the test certificates: " + read_file(dir_.sub("openssl.log"));
        return;
    }
    members_.resize(members);
    for (size_t i = 0; i < members; ++i) members_[i].name = "m" + std::to_string(i);
    for (int attempt = 1;; ++attempt) {
        if (start_new_cluster()) {
            ready_ = true;
            return;
        }
        if (attempt == kBindAttempts || !bind_failed()) return;
        // Started anew from nothing, on other ports.
        for (size_t i = 0; i < members; ++i) kill(i);
        for (const Member& m : members_) {
            std::error_code ec;
            std::filesystem::remove_all(dir_.sub(m.name), ec);
            std::filesystem::rename(dir_.sub(m.name + ".log"),
                                    dir_.sub(m.name + ".log." + std::to_string(attempt)), ec);
        }
    }
}

bool EtcdCluster::start_new_cluster() {
    for (Member& m : members_) {
        m.client_port = reserve_port(&why_);
        m.peer_port = m.client_port != 0 ? reserve_port(&why_) : 0;
        if (m.peer_port == 0) return false;
    }
    for (size_t i = 0; i < members_.size(); ++i) {
        if (!spawn(i, true)) {
            why_ = "cannot start " + members_[i].name;
            return false;
        }
    }
    for (size_t i = 0; i < members_.size(); ++i) {
        if (!wait_healthy(i, kNewHealthyMs)) {
            why_ = members_[i].name +
                   " did not become healthy: " + read_file(dir_.sub(members_[i].name + ".log"));
            return false;
        }
    }
    return true;
}

bool EtcdCluster::bind_failed() const {
    for (const Member& m : members_) {
        if (read_file(dir_.sub(m.name + ".log")).find("address already in use") !=
            std::string::npos) {
            return true;
        }
    }
    return false;
}

EtcdCluster::~EtcdCluster() {
    for (size_t i = 0; i < members_.size(); ++i) kill(i);
}

std::vector<std::string> EtcdCluster::client_urls() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < members_.size(); ++i) out.push_back(client_url(i));
    return out;
}

std::string EtcdCluster::client_url(size_t i) const {
    return url(members_[i].client_port, tls_);
}

bool EtcdCluster::spawn(size_t i, bool initial) {
    Member& m = members_[i];
    std::string initial_cluster;
    for (const Member& o : members_) {
        initial_cluster += (initial_cluster.empty() ? "" : ",") + o.name + "=" + url(o.peer_port);
    }
    std::vector<std::string> args = {
        kEtcd, "--name=" + m.name, "--data-dir=" + dir_.sub(m.name),
        "--listen-client-urls=" + url(m.client_port, tls_),
        "--advertise-client-urls=" + url(m.client_port, tls_),
        "--listen-peer-urls=" + url(m.peer_port),
        "--initial-advertise-peer-urls=" + url(m.peer_port), "--initial-cluster=" + initial_cluster,
        "--initial-cluster-token=" + token_,
        std::string("--initial-cluster-state=") + (initial ? "new" : "existing"),
        // Fast elections: a test kills leaders on purpose.
        "--heartbeat-interval=50", "--election-timeout=500", "--logger=zap", "--log-level=warn"};
    if (tls_) {
        args.push_back("--cert-file=" + dir_.sub("server.crt"));
        args.push_back("--key-file=" + dir_.sub("server.key"));
        args.push_back("--client-cert-auth");
        args.push_back("--trusted-ca-file=" + dir_.sub("ca.crt"));
    }
    for (const auto& a : extra_) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string log = dir_.sub(m.name + ".log");
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, kEtcd, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return false;
    m.pid = pid;
    return true;
}

bool EtcdCluster::wait_healthy(size_t i, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    cluster::EtcdConfig cfg;
    cfg.endpoints = {client_url(i)};
    if (tls_) {
        cfg.ca_file = ca_file();
        cfg.cert_file = client_cert();
        cfg.key_file = client_key();
    }
    cfg.attempt_timeout_ms = 500;
    cfg.budget_ms = 500;
    cluster::EtcdClient client(cfg);
    while (std::chrono::steady_clock::now() < deadline) {
        // A linearizable read answers only once the member has a leader and is caught up.
        if (client.get("/health-probe")) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

void EtcdCluster::kill(size_t i) {
    Member& m = members_[i];
    if (m.pid <= 0) return;
    ::kill(m.pid, SIGKILL);
    int status = 0;
    ::waitpid(m.pid, &status, 0);
    m.pid = -1;
}

bool EtcdCluster::start(size_t i) {
    if (members_[i].pid > 0) return true;
    return spawn(i, false) && wait_healthy(i, 20'000);
}

bool EtcdCluster::rebuild_from_nothing() {
    for (size_t i = 0; i < members_.size(); ++i) kill(i);
    for (const Member& m : members_) {
        std::error_code ec;
        std::filesystem::remove_all(dir_.sub(m.name), ec);
        if (ec) return false;
    }
    for (size_t i = 0; i < members_.size(); ++i) {
        if (!spawn(i, true)) return false;
    }
    for (size_t i = 0; i < members_.size(); ++i) {
        if (!wait_healthy(i, kRebuildHealthyMs)) return false;
    }
    return true;
}

bool EtcdCluster::save_snapshot(const std::string& file) const {
    if (tls_) return false;  // not needed by any test: the TLS flags are not passed
    const std::string cmd = std::string("ETCDCTL_API=3 ") + kEtcdctl +
                            " --endpoints=" + client_url(0) + " snapshot save " + file + " >>" +
                            dir_.sub("snapshot.log") + " 2>&1";
    return std::system(cmd.c_str()) == 0;
}

bool EtcdCluster::restore_snapshot(const std::string& file) {
    std::string initial_cluster;
    for (const Member& o : members_) {
        initial_cluster += (initial_cluster.empty() ? "" : ",") + o.name + "=" + url(o.peer_port);
    }
    for (size_t i = 0; i < members_.size(); ++i) kill(i);
    for (const Member& m : members_) {
        std::error_code ec;
        std::filesystem::remove_all(dir_.sub(m.name), ec);
        if (ec) return false;
        const std::string cmd = std::string("ETCDCTL_API=3 ") + kEtcdctl + " snapshot restore " +
                                file + " --name=" + m.name + " --data-dir=" + dir_.sub(m.name) +
                                " --initial-cluster=" + initial_cluster +
                                " --initial-cluster-token=" + token_ +
                                " --initial-advertise-peer-urls=" + url(m.peer_port) + " >>" +
                                dir_.sub("snapshot.log") + " 2>&1";
        if (std::system(cmd.c_str()) != 0) return false;
    }
    for (size_t i = 0; i < members_.size(); ++i) {
        if (!spawn(i, true)) return false;
    }
    for (size_t i = 0; i < members_.size(); ++i) {
        if (!wait_healthy(i, kRebuildHealthyMs)) return false;
    }
    return true;
}

}  // namespace shmipam::testing
