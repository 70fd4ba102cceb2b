// shmipamctl: the operator's tool. A thin shell over engine/inspect: it maps a network's state
// read-only, renders it, and exits 0 (clean), 1 (violations found) or 2 (cannot read).
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <iostream>

#include "engine/inspect.h"
#include "engine/network_store.h"
#include "engine/recovery.h"
#include "shm/process_identity.h"
#include "tools/render_text.h"

using namespace shmipam;

namespace {

constexpr int kExitViolations = 1;
constexpr int kExitCannotRead = 2;

Expected<std::unique_ptr<engine::NetworkStore>> open_network(const std::string& run_dir,
                                                             const std::string& network) {
    if (network.empty() || network.find('/') != std::string::npos || network[0] == '.') {
        return make_error(Code::kInvalidConfig, "invalid network name \"" + network + "\"");
    }
    return engine::NetworkStore::open_existing(run_dir + "/" + network, shm::Access::kReadOnly);
}

int cannot_read(const Error& e) {
    std::cerr << "shmipamctl: " << e.msg << (e.details.empty() ? "" : " (" + e.details + ")")
              << "\n";
    return kExitCannotRead;
}

}  // namespace

int run(int argc, char** argv);

// repair: a damaged index is moved aside; damaged blocks retire the state; dead invocations'
// leftovers are healed. The next plugin invocation rebuilds retired state from the journal.
int repair(const std::string& run_dir, const std::string& network, bool apply) {
    const std::string dir = run_dir + "/" + network;
    const std::string index_path = dir + "/" + shm::IndexFile::kFileName;
    auto store = engine::NetworkStore::open_existing(dir, shm::Access::kReadWrite);
    if (!store) {
        const Code c = store.error().code;
        if (c != Code::kArenaDamaged && c != Code::kArenaVersion && c != Code::kArenaForeign) {
            return cannot_read(store.error());
        }
        std::cout << "index unusable: " << store.error().msg << "\n"
                  << (apply ? "moved" : "would move") << " it aside to index.damaged.<time>; the "
                  << "next invocation rebuilds the network from its journal\n";
        if (!apply) return kExitViolations;
        const std::string aside = index_path + ".damaged." + std::to_string(::time(nullptr));
        if (::rename(index_path.c_str(), aside.c_str()) != 0) {
            std::cerr << "shmipamctl: cannot move " << index_path << ": " << std::strerror(errno)
                      << "\n";
            return kExitCannotRead;
        }
        return 0;
    }
    auto blocks = (*store)->all_blocks();
    if (!blocks) {
        std::cout << "block unusable: " << blocks.error().msg << "\n"
                  << (apply ? "retired" : "would retire") << " the network's state; the next "
                  << "invocation rebuilds it from its journal\n";
        if (!apply) return kExitViolations;
        (*store)->act_as_invocation();
        (void)(*store)->retire("shmipamctl repair: " + blocks.error().msg);
        return 0;
    }
    auto before = engine::verify(**store);
    if (!before) return cannot_read(before.error());
    for (const auto& v : before->violations)
        std::cout << "found " << v.kind << ": " << v.detail << "\n";
    if (!apply) {
        std::cout << (before->violations.empty() ? "nothing to repair\n"
                                                 : "run with --apply to heal these\n");
        return before->violations.empty() ? 0 : kExitViolations;
    }
    (*store)->act_as_invocation();
    auto swept = engine::sweep(**store);
    if (!swept) return cannot_read(swept.error());
    std::cout << "reaped " << swept->dead_leases << " dead leases, healed " << swept->entries_healed
              << " attachments and " << swept->slots_healed << " addresses\n";
    auto after = engine::verify(**store);
    if (!after) return cannot_read(after.error());
    std::cout << tools::verify_to_text(*after);
    return after->violations.empty() ? 0 : kExitViolations;
}

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::cerr << "shmipamctl: " << e.what() << "\n";
        return kExitCannotRead;
    }
}

int run(int argc, char** argv) {
    CLI::App app{"shmipamctl: inspect and check shmipam's address state on this node"};
    app.require_subcommand(1);
    std::string run_dir = "/run/shmipam";
    std::string network;
    bool as_json = false;
    app.add_option("--run-dir", run_dir, "where the arenas live (the ipam runDir)")
        ->capture_default_str();

    auto* dump_cmd = app.add_subcommand("dump", "every address that is not free, and to whom");
    dump_cmd->add_option("network", network, "network name")->required();
    dump_cmd->add_flag("--json", as_json, "print JSON");

    auto* verify_cmd = app.add_subcommand("verify", "check every invariant of the network's state");
    verify_cmd->add_option("network", network, "network name")->required();
    verify_cmd->add_flag("--json", as_json, "print JSON");

    bool apply = false;
    auto* repair_cmd = app.add_subcommand(
        "repair",
        "heal what dead invocations left; retire damaged state so it is rebuilt from "
        "the journal (dry run unless --apply)");
    repair_cmd->add_option("network", network, "network name")->required();
    repair_cmd->add_flag("--apply", apply, "make the changes (default: only say what they are)");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : kExitCannotRead;
    }

    if (repair_cmd->parsed()) return repair(run_dir, network, apply);

    auto store = open_network(run_dir, network);
    if (!store) return cannot_read(store.error());
    if (dump_cmd->parsed()) {
        auto d = engine::dump(**store);
        if (!d) return cannot_read(d.error());
        std::cout << (as_json ? tools::dump_to_json(*d).dump(2) + "\n" : tools::dump_to_table(*d));
        return 0;
    }
    auto rep = engine::verify(**store);
    if (!rep) return cannot_read(rep.error());
    std::cout << (as_json ? tools::verify_to_json(*rep).dump(2) + "\n"
                          : tools::verify_to_text(*rep));
    return rep->violations.empty() ? 0 : kExitViolations;
}
