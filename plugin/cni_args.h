// CNI_ARGS: "K=V;K=V". Unknown keys are an error unless IgnoreUnknown is set (as in the
// reference types.LoadArgs); Kubernetes always sets it and passes the pod's identity.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace shmipam::cni {

struct CniArgs {
    std::vector<std::string> ips;  // IP=a[,b]
    std::string pod_namespace;     // K8S_POD_NAMESPACE
    std::string pod_name;          // K8S_POD_NAME
    std::string pod_uid;           // K8S_POD_UID
};

Expected<CniArgs> parse_cni_args(const std::string& text);

}  // namespace shmipam::cni
