// The envelope both helper protocols share (cluster/helper_protocol.h, kube/pod_protocol.h). The
// plugin, which links neither an etcd nor a Kubernetes client, execs a helper program with one
// request on its stdin: a JSON object {"version": N, "op": "<op>", ...the op's fields}. The
// helper answers on stdout with the op's answer object and exit 0, or with an error object
// {"code": <CNI code>, "msg": ..., "details": ...} and exit 1, which the plugin passes on as
// its own. A request of another version, or of an op the helper does not know, is refused with
// code 1 (incompatible version): a plugin and a helper of two releases never misread each other.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/function_ref.h"
#include "base/status.h"

namespace shmipam::base::envelope {

// One helper protocol: who answers (named in every message), its version, and what to do when
// the two sides are of different releases.
struct Protocol {
    const char* speaker;  // "the cluster helper"
    int version;
    const char* one_release_hint;  // "install the plugin and shmipam-cluster of one release ..."
};

// {"version": N, "op": op}: every request starts so.
nlohmann::json request_head(const Protocol& p, std::string_view op);

// A request as the helper reads it: the object, once its version matched, and its op ("" when
// it names none). Code 6 for text that is no JSON object, code 1 for another version.
struct Received {
    nlohmann::json body;
    std::string op;
};
Expected<Received> receive(const Protocol& p, std::string_view text);

// Code 1: an op this release of the helper does not know.
Error unknown_op(const Protocol& p, const std::string& op);

// The error answer the helper prints.
nlohmann::json error_json(const Error& e);

// The helper's stdout read back: the op's answer object, or the error it answered with its code
// (a code that is not a positive integer is the helper's fault: 999), or 999 for text that is
// no JSON object (the first kAnswerShownBytes of it in the details).
inline constexpr size_t kAnswerShownBytes = 200;
Expected<nlohmann::json> answer_object(const Protocol& p, std::string_view text);

// Code 7: "<speaker>'s <what> needs \"<field>\" (<want>)", the words of every field refused.
Error field_error(const Protocol& p, const std::string& what, const std::string& field,
                  const char* want);

// Readers of one object's fields (a request's, or an answer's), each answering code 7 that
// names the field and what it must be: "the cluster helper's claim-block request needs
// \"block\" (a CIDR)". An absent or null field takes the fallback where one is given. Never throw.
class FieldReader {
  public:
    FieldReader(const Protocol& p, const nlohmann::json& object, std::string what)
        : protocol_(&p), object_(&object), what_(std::move(what)) {}

    Expected<std::string> text(const char* field, bool required = true) const;
    Expected<uint64_t> count(const char* field, std::optional<uint64_t> fallback) const;
    Expected<int64_t> integer(const char* field, int64_t fallback) const;
    Expected<bool> flag(const char* field) const;  // absent: false
    Expected<std::map<std::string, std::string>> strings(const char* field) const;

    Error field_error(const std::string& field, const char* want) const;
    const nlohmann::json& object() const { return *object_; }
    const std::string& what() const { return what_; }

  private:
    const Protocol* protocol_;
    const nlohmann::json* object_;
    std::string what_;  // "claim-block request", "read-pod answer"
};

// What a helper's main does: reads the request from stdin and hands it to `serve`, which prints
// the answer (answer()) or the error (answer_error()) and returns the exit status. An exception
// is answered as code 999 too: the plugin always gets an answer it can pass on, never a crash
// with no answer.
int helper_main(const Protocol& p, FunctionRef<int(std::string_view request)> serve);
// Prints the answer object on stdout: exit status 0.
int answer(const nlohmann::json& a);
// Prints the error answer on stdout: exit status 1.
int answer_error(const Error& e);

}  // namespace shmipam::base::envelope
