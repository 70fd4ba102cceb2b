// dump-file's text and JSON (file_dump.h). Text items are `name=value` words so that grep and
// awk can take them apart; a value with a space (or none) is quoted for the same reason.
#include "tools/render/file_dump.h"

#include <nlohmann/json.hpp>

namespace shmipam::tools {

namespace {

using ordered = nlohmann::ordered_json;

std::string word(const FieldValue& v) {
    if (const auto* n = std::get_if<uint64_t>(&v)) return std::to_string(*n);
    const std::string& s = std::get<std::string>(v);
    if (s.empty() || s.find(' ') != std::string::npos) return "\"" + s + "\"";
    return s;
}

std::string line_of(const FieldValue& v) {
    if (const auto* n = std::get_if<uint64_t>(&v)) return std::to_string(*n);
    const std::string& s = std::get<std::string>(v);
    return s.empty() ? "-" : s;
}

ordered value(const FieldValue& v) {
    if (const auto* n = std::get_if<uint64_t>(&v)) return *n;
    return std::get<std::string>(v);
}

ordered object(const std::vector<Field>& fields) {
    ordered o = ordered::object();
    for (const auto& f : fields) o[f.name] = value(f.value);
    return o;
}

}  // namespace

std::string file_dump_text(const FileDescription& d) {
    std::string out = "file: " + d.path + "\nkind: " + d.kind + "\n";
    for (const auto& why : d.header_damage) out += "DAMAGED: " + why + "\n";
    for (const auto& f : d.header) out += f.name + ": " + line_of(f.value) + "\n";
    for (const auto& i : d.items) {
        if (!i.damage.empty()) {
            out += "damaged " + i.what + " at offset " + std::to_string(i.offset) + " (" +
                   i.damage + ")\n";
            continue;
        }
        out += i.what + " " + std::to_string(i.number) + " at offset " + std::to_string(i.offset) +
               ":";
        for (const auto& f : i.fields) out += " " + f.name + "=" + word(f.value);
        out += "\n";
    }
    out += "summary:";
    for (const auto& f : d.summary) out += " " + f.name + "=" + word(f.value);
    out += d.damaged() ? " (damage shown above)\n" : "\n";
    return out;
}

std::string file_dump_json(const FileDescription& d) {
    ordered out = ordered::object();
    out["file"] = d.path;
    out["kind"] = d.kind;
    out["damaged"] = d.damaged();
    out["headerDamage"] = d.header_damage;
    out["header"] = object(d.header);
    out["items"] = ordered::array();
    for (const auto& i : d.items) {
        ordered item = ordered::object();
        item["what"] = i.what;
        item["number"] = i.number;
        item["offset"] = i.offset;
        if (!i.damage.empty()) item["damage"] = i.damage;
        for (const auto& f : i.fields) item[f.name] = value(f.value);
        out["items"].push_back(item);
    }
    out["summary"] = object(d.summary);
    return out.dump(2) + "\n";
}

}  // namespace shmipam::tools
