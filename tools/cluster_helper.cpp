// shmipam-cluster: the cluster helper (docs/cluster.md). The plugin links no etcd client (a
// static libcurl with OpenSSL would cost every exec); on the rare path that needs the cluster
// store it execs this helper with one request on stdin (cluster/helper_protocol.h), which the
// cluster agent serves over etcd (cluster/agent.h) and answers on stdout: the op's answer and
// exit 0, or an error {"code", "msg", "details"} and exit 1, which the plugin passes on.
#include <fcntl.h>

#include "base/build_version.h"
#include "base/helper_envelope.h"
#include "cluster/agent.h"
#include "cluster/etcd_client.h"
#include "cluster/etcd_config.h"
#include "cluster/helper_protocol.h"

using namespace shmipam;
namespace protocol = cluster::protocol;

namespace {

constexpr auto fail = base::envelope::answer_error;

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
    return base::envelope::answer(cluster::agent::answer_json(*answer));
}

}  // namespace

SHMIPAM_STAMP_BUILD_VERSION();  // read by shmipamctl install

int main() {
    return base::envelope::helper_main(protocol::kProtocol, [](std::string_view text) {
        auto request = protocol::decode(text);
        if (!request) return fail(request.error());
        return serve(*request);
    });
}
