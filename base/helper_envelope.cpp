#include "base/helper_envelope.h"

#include <limits>

namespace shmipam::base::envelope {

using nlohmann::json;

json request_head(const Protocol& p, std::string_view op) {
    return json{{"version", p.version}, {"op", op}};
}

Expected<Received> receive(const Protocol& p, std::string_view text) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return make_error(Code::kDecode,
                          std::string(p.speaker) + " reads one JSON object on stdin, not this");
    }
    const auto version = j.find("version");
    if (version == j.end() || !version->is_number_integer() ||
        version->get<int64_t>() != p.version) {
        return make_error(Code::kIncompatibleVersion,
                          std::string(p.speaker) + " speaks protocol version " +
                              std::to_string(p.version) + ", and the request is of version " +
                              (version == j.end() ? std::string("none") : version->dump()),
                          p.one_release_hint);
    }
    const auto op = j.find("op");
    std::string name = op != j.end() && op->is_string() ? op->get<std::string>() : "";
    return Received{std::move(j), std::move(name)};
}

Error unknown_op(const Protocol& p, const std::string& op) {
    return make_error(Code::kIncompatibleVersion,
                      std::string(p.speaker) + " knows no op \"" + op + "\" in protocol version " +
                          std::to_string(p.version),
                      p.one_release_hint);
}

json error_json(const Error& e) {
    json j{{"code", int(e.code)}, {"msg", e.msg}};
    if (!e.details.empty()) j["details"] = e.details;
    return j;
}

Expected<json> answer_object(const Protocol& p, std::string_view text) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return make_error(Code::kInternal,
                          std::string(p.speaker) + " answered something that is not a JSON object",
                          std::string(text.substr(0, kAnswerShownBytes)));
    }
    const auto code = j.find("code");
    if (code == j.end()) return j;
    Error e;
    e.code = code->is_number_integer() && code->get<int64_t>() > 0 &&
                     code->get<int64_t>() <= std::numeric_limits<int>::max()
                 ? Code(code->get<int>())
                 : Code::kInternal;
    if (auto m = j.find("msg"); m != j.end() && m->is_string()) e.msg = m->get<std::string>();
    if (auto d = j.find("details"); d != j.end() && d->is_string()) {
        e.details = d->get<std::string>();
    }
    return e;
}

Error field_error(const Protocol& p, const std::string& what, const std::string& field,
                  const char* want) {
    return make_error(Code::kInvalidConfig, std::string(p.speaker) + "'s " + what + " needs \"" +
                                                field + "\" (" + want + ")");
}

Error FieldReader::field_error(const std::string& field, const char* want) const {
    return envelope::field_error(*protocol_, what_, field, want);
}

Expected<std::string> FieldReader::text(const char* field, bool required) const {
    const auto it = object_->find(field);
    if (it == object_->end() || it->is_null()) {
        if (required) return field_error(field, "a string");
        return std::string();
    }
    if (!it->is_string()) return field_error(field, "a string");
    return it->get<std::string>();
}

Expected<uint64_t> FieldReader::count(const char* field, std::optional<uint64_t> fallback) const {
    const auto it = object_->find(field);
    if (it == object_->end() || it->is_null()) {
        if (fallback) return *fallback;
        return field_error(field, "a non-negative integer");
    }
    if (!it->is_number_unsigned()) return field_error(field, "a non-negative integer");
    return it->get<uint64_t>();
}

Expected<int64_t> FieldReader::integer(const char* field, int64_t fallback) const {
    const auto it = object_->find(field);
    if (it == object_->end() || it->is_null()) return fallback;
    if (!it->is_number_integer()) return field_error(field, "an integer");
    return it->get<int64_t>();
}

Expected<bool> FieldReader::flag(const char* field) const {
    const auto it = object_->find(field);
    if (it == object_->end() || it->is_null()) return false;
    if (!it->is_boolean()) return field_error(field, "true or false");
    return it->get<bool>();
}

Expected<std::map<std::string, std::string>> FieldReader::strings(const char* field) const {
    std::map<std::string, std::string> out;
    const auto it = object_->find(field);
    if (it == object_->end() || it->is_null()) return out;
    if (!it->is_object()) return field_error(field, "an object of strings");
    for (const auto& [k, v] : it->items()) {
        if (!v.is_string()) return field_error(field, "an object of strings");
        out[k] = v.get<std::string>();
    }
    return out;
}

}  // namespace shmipam::base::envelope
