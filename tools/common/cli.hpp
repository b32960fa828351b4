// Shared plumbing of the cr_* tools: error reporting, progress line, JSON.
#pragma once

#include <CLI/CLI.hpp>
#include <ckpt/ckpt.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace ckpt::cli {

// Prints "tool: cause" on stderr and returns the exit status for it.
int fail(const std::string& tool, const Error& e);
int fail(const std::string& tool, const std::string& message);
// The same for a usage error found after parsing: "tool: message (see
// --help)", status 2.
int usage_error(const std::string& tool, const std::string& message);

// A progress callback that draws one self-erasing line on stderr when it is
// a terminal and the work has taken more than half a second.
ProgressFn progress_line(const std::string& verb);
void progress_done();

// A checkpoint's statistics as the tools print them (CRIU's stats-dump is the model).
nlohmann::json stats_json(const CheckpointStats& s);

// Prints a JSON object on stdout, one line.
void print_json(const nlohmann::json& j);

// Waits for a restored child, forwarding SIGTERM/HUP/USR1/USR2 to it and
// ignoring ^C / ^\ (a terminal sends those to the child too); returns its
// exit code, or 128 + the signal that ended it.
int wait_child(pid_t pid);

// Whether PID names a zombie (a process that ended, not yet reaped).
bool is_zombie(pid_t pid);

// The options cr_full and cr_incr share (--dir, PID, --tree, --kill, --live,
// --tcp-established, --scratch-max, --compress, --no-sync, --direct,
// --tracker, --adaptive, --huge-pages, --trace) into `opts`, and --json
// into `json`; `tool` names the tool in --trace lines.
void add_checkpoint_options(CLI::App& app, const std::string& tool, CheckpointOptions& opts,
                            bool& json, const std::string& dir_help,
                            const std::string& tracker_help);

// A log (LogFn) that prints each line on stderr as "TOOL: line": notes
// always, traces only with `trace`.
LogFn stderr_log(const std::string& tool, bool trace);

// Sets `log` to stderr_log(tool, false), and adds --trace, which makes it
// print traces too (each phase's time).
void add_trace_option(CLI::App& app, LogFn& log, const std::string& tool);

// Runs CLI11's parse; returns -1 to continue, or the exit status to return:
// 0 after --help, 2 after a usage error, which is one line on stderr
// ("TOOL: what is wrong (see --help)").
int parse(CLI::App& app, int argc, char** argv);

}  // namespace ckpt::cli
