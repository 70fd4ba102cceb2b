// A real etcd cluster for tests (Debian's etcd-server, installed by scripts/install-deps.sh):
// `members` processes on loopback ports reserved for them (tests/support/test_ports.h) with
// temporary data directories, started together as a new cluster, killed by pid when the fixture
// goes. Members can be killed (SIGKILL) and started again on their data directory, as a node's etcd
// is.
#pragma once

#include <sys/types.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace shmipam::testing {

class EtcdCluster {
  public:
    // Starts the members and waits until every one answers /health; `ready` says whether they
    // did (with why_not_ready() saying why not).
    // With tls, clients speak HTTPS and must present a certificate of the test CA (made with
    // the openssl command line, into the fixture's directory).
    // `extra` goes to every member's command line (e.g. "--auth-token-ttl=1").
    explicit EtcdCluster(size_t members = 3, bool tls = false, std::vector<std::string> extra = {});
    ~EtcdCluster();
    EtcdCluster(const EtcdCluster&) = delete;
    EtcdCluster& operator=(const EtcdCluster&) = delete;

    // A host name the members' TLS certificate is also valid for, beside 127.0.0.1: a test that
    // reaches them by name maps it to 127.0.0.1 (an /etc/hosts of its own).
    static constexpr const char* kHostName = "etcd.shmipam.test";

    static bool installed();  // the etcd binary is there
    bool ready() const { return ready_; }
    const std::string& why_not_ready() const { return why_; }

    std::vector<std::string> client_urls() const;
    std::string client_url(size_t i) const;
    size_t size() const { return members_.size(); }

    // TLS: the CA that signed the members' and the client's certificates, the client's pair, and
    // a second CA that signed nothing of this cluster.
    std::string ca_file() const { return dir_.sub("ca.crt"); }
    std::string client_cert() const { return dir_.sub("client.crt"); }
    std::string client_key() const { return dir_.sub("client.key"); }
    std::string other_ca_file() const { return dir_.sub("other-ca.crt"); }

    void kill(size_t i);   // SIGKILL, and reaped
    bool start(size_t i);  // again, on its data directory; true once it answers /health
    bool running(size_t i) const { return members_[i].pid > 0; }
    // What an operator who lost every member does (docs/cluster.md, "The store went back in
    // time"): every member killed, its data directory deleted, all started again as a new
    // cluster with the same flags (so etcd answers with the same cluster id, an empty store and
    // its revision back at 1). True once every member answers /health.
    bool rebuild_from_nothing();
    // etcdctl snapshot save from member 0 into `file`; then, as an operator restoring it, every
    // member killed and its data directory restored from the file with the same flags (the same
    // cluster id), all started again. True once every member answers /health.
    bool save_snapshot(const std::string& file) const;
    bool restore_snapshot(const std::string& file);

  private:
    struct Member {
        std::string name;
        uint16_t client_port = 0, peer_port = 0;
        pid_t pid = -1;
    };
    bool spawn(size_t i, bool initial);
    // Every member on newly reserved ports, as a new cluster; true once each answers /health.
    bool start_new_cluster();
    // A member's log says it could not bind one of its ports.
    bool bind_failed() const;
    bool make_certificates();
    bool wait_healthy(size_t i, int timeout_ms);

    TempDir dir_;
    std::vector<Member> members_;
    std::string token_;
    bool tls_ = false;
    std::vector<std::string> extra_;
    bool ready_ = false;
    std::string why_;
};

}  // namespace shmipam::testing

// In a test's SetUp: skips it with a message where etcd is not installed, fails it in CI.
#define SHMIPAM_REQUIRE_ETCD()                                                             \
    do {                                                                                   \
        if (!::shmipam::testing::EtcdCluster::installed()) {                               \
            if (std::getenv("CI") != nullptr) FAIL() << "etcd is not installed";           \
            GTEST_SKIP() << "etcd is not installed (scripts/install-deps.sh installs it)"; \
        }                                                                                  \
    } while (0)
