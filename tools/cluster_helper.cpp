// shmipam-cluster: the cluster helper (docs/cluster.md). The plugin links no etcd client (a
// static libcurl with OpenSSL would cost every exec); on the rare path that needs the cluster
// store it execs this helper with one request on stdin (cluster/helper_protocol.h), which the
// cluster agent serves over etcd (cluster/agent.h) and answers on stdout: the op's answer and
// exit 0, or an error {"code", "msg", "details"} and exit 1, which the plugin passes on.
#include <fcntl.h>

#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/build_version.h"
#include "cluster/agent.h"
#include "cluster/etcd_client.h"
#include "cluster/etcd_config.h"
#include "cluster/helper_protocol.h"

using namespace shmipam;
namespace protocol = cluster::protocol;

namespace {

int fail(const Error& e) {
    std::cout << protocol::error_json(e).dump() << "\n";
    return 1;
}

int serve(const protocol::Request& request) {
    const protocol::Scope& scope = protocol::scope_of(request);
    auto cfg = cluster::etcd_config_from_json(scope.etcd);
    if (!cfg) return fail(cfg.error());
    cluster::EtcdClient etcd(*cfg);
    cluster::agent::LockTaking lock;
    // A caller that holds the pool lock hands it over as fd 3 (so no second helper starts
    // meanwhile).
    if (::fcntl(protocol::kHandedLockFd, F_GETFD) >= 0) lock.handed_fd = protocol::kHandedLockFd;
    lock.wait_ms = cluster::kLockWaitBudgets * cfg->budget_ms;
    auto answer = cluster::agent::serve(request, etcd, lock);
    if (!answer) return fail(answer.error());
    std::cout << cluster::agent::answer_json(*answer).dump() << "\n";
    return 0;
}

}  // namespace

SHMIPAM_STAMP_BUILD_VERSION();  // read by shmipamctl install

int main() {
    try {
        const std::string text{std::istreambuf_iterator<char>(std::cin),
                               std::istreambuf_iterator<char>()};
        auto request = protocol::decode(text);
        if (!request) return fail(request.error());
        return serve(*request);
    } catch (const std::exception& e) {
        // Every answer is a CNI error the plugin can pass on, never a crash with no answer.
        return fail(
            make_error(Code::kInternal, std::string("the cluster helper failed: ") + e.what()));
    }
}
