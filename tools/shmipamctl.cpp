// shmipamctl: the operator's tool. Reads arenas without locks (never slowing ADDs down), and
// changes state only through the same CAS protocol as the plugin. Exit codes: 0 clean or done,
// 1 violations found (or a dry run found work, or dump-file showed damage), 2 cannot read.
// Each verb registers its own subcommand and runs from its callback (tools/verbs/).
#include <CLI/CLI.hpp>
#include <iostream>

#include "base/build_version.h"
#include "tools/verbs/verbs.h"

SHMIPAM_STAMP_BUILD_VERSION();

using namespace shmipam::tools;

namespace {

// In the order --help lists them.
constexpr RegisterVerb kVerbs[] = {
    register_ls,        register_dump,       register_verify,  register_repair,  register_release,
    register_claims,    register_states,     register_gc,      register_stats,   register_metrics,
    register_render,    register_dump_file,  register_explain, register_cluster, register_install,
    register_uninstall, register_kubeconfig,
};

}  // namespace

int main(int argc, char** argv) {
    try {
        CLI::App app{"shmipamctl: see, check and repair shmipam's address state on this node"};
        app.require_subcommand(1);
        CommonOptions common;
        app.add_option("--run-dir", common.run_dir, "where the arenas live (the ipam runDir)")
            ->capture_default_str();
        int exit_code = kExitCannotRead;
        for (RegisterVerb register_verb : kVerbs) register_verb(app, common, exit_code);
        try {
            app.parse(argc, argv);
        } catch (const CLI::ParseError& e) {
            return app.exit(e) == 0 ? 0 : kExitCannotRead;
        }
        return exit_code;
    } catch (const std::exception& e) {
        std::cerr << "shmipamctl: " << e.what() << "\n";
        return kExitCannotRead;
    }
}
