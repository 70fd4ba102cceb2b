// The pod facts no runtime passes (labels, controller), read from the API server through the
// Kubernetes helper (shmipam-kube, kube/pod_protocol.h) when an ADD needs them, and only then:
// an ordinary pod's ADD pays nothing (docs/kubernetes.md, "When the plugin asks").
#pragma once

#include <string>

#include "base/status.h"
#include "ipam/request.h"
#include "pools/catalog.h"

namespace shmipam::ipam {

// Whether the ADD needs the pod from the API server: ipam.kubernetes is set, the pod was not
// read yet, and a candidate pool of its selection has podAffinity (`catalog`: pool mode), or the
// pod could keep an address by name (it asks by annotation, or statefulSetFixedIP or the
// StatefulSet default applies and its name could be a StatefulSet pod's or a KubeVirt
// launcher's).
bool needs_pod_from_api(const Request& r, const pools::Catalog* catalog);

// `r` with its pod as the API server gives it: labels and controller the pod's, annotations the
// runtime's completed with the pod's (the runtime's win). 11 when the pod found is not the
// sandbox's (its uid differs from K8S_POD_UID: it was re-created meanwhile); the helper's error
// otherwise (11 unreachable, timed out, 5xx or not found; 7 a bad kubeconfig or a refusal).
Expected<Request> with_pod_from_api(const Request& r);

// shmipam-kube beside the running plugin, unless the config names one.
std::string kube_helper_path(const KubernetesApi& api);

}  // namespace shmipam::ipam
