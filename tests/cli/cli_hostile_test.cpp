// SPDX-License-Identifier: Apache-2.0
// Hostile roots and inputs, run as a user would run them: a FIFO where the
// reader expects a file, a device or FIFO as --topology, control characters in
// files and variables, empty and zero option values. Each case must end
// quickly with one clear error line (the harness kills a run after
// cli_test::run_timeout_s and reports rc timed_out, so a hang fails the test).

#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "run_tool.hpp"
#include "support/check.hpp"

using cli_test::Run;
using cli_test::tool;

namespace {

namespace fs = std::filesystem;

/// A fresh copy of the two-CPU machine named `name`.
fs::path fresh_root(const std::string& name) {
  fs::path dir = cli_test::temp_dir(name);
  cli_test::write_machine(dir, cli_test::two_cpu_machine());
  return dir;
}

/// Replaces the file `rel` of `root` with a FIFO nobody writes to.
void plant_fifo(const fs::path& root, const std::string& rel) {
  fs::path p = root / rel;
  fs::remove(p);
  REQUIRE(::mkfifo(p.c_str(), 0644) == 0);
}

bool has_control_byte(const std::string& s) {
  for (char c : s)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\n') || c == 0x7f) return true;
  return false;
}

// The files a FIFO is planted at: each is one the reader reads for every
// command (CPU list, node list, a GPU's PCI class, the allowed set).
const std::vector<std::string> fifo_sites{
    "sys/devices/system/cpu/online",
    "sys/devices/system/node/node0/cpulist",
    "sys/devices/pci0000:00/0000:17:00.0/class",
    "proc/self/status",
};

}  // namespace

TEST_CASE("a FIFO planted in a root stops bind, topo, record and exec with an error naming it, never a hang") {
  for (const auto& site : fifo_sites) {
    CAPTURE(site);
    fs::path root = fresh_root("fifo");
    plant_fifo(root, site);
    fs::path out = cli_test::temp_dir("fifo-out") / "rec";
    std::string name = fs::path(site).filename().string();
    const std::vector<std::vector<std::string>> commands{
        {"bind", "--root", root.string(), "--gpu", "0"},
        {"topo", "--root", root.string()},
        {"record", "--root", root.string(), "--out", out.string()},
        {"exec", "--root", root.string(), "--gpu", "0", "--", "true"},
    };
    for (const auto& args : commands) {
      CAPTURE(args[0]);
      Run r = tool(args);
      REQUIRE(r.rc != cli_test::timed_out);
      CHECK(r.rc == 3);  // an unreadable input file (docs/cli.md exit codes)
      CHECK(r.one_error_line());
      CHECK(r.err.find("not a regular file") != std::string::npos);
      CHECK(r.err.find(name) != std::string::npos);
      CHECK(r.out.empty());
    }
    // --fallback unbound: the load error is a warning and the command runs.
    Run r = tool({"exec", "--root", root.string(), "--gpu", "0", "--fallback", "unbound", "--", "true"});
    REQUIRE(r.rc != cli_test::timed_out);
    CHECK(r.rc == 0);
    CHECK(r.err.find("warning") != std::string::npos);
    CHECK(r.err.find("not a regular file") != std::string::npos);
  }
}

TEST_CASE("--topology of a device, a FIFO or a directory is a clear error, at once") {
  fs::path dir = cli_test::temp_dir("topology-inputs");
  fs::path fifo = dir / "machine.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  struct Case {
    std::string path;
    std::string says;
  };
  // /dev/zero never ends: read whole it grew memory until bad_alloc.
  const std::vector<Case> cases{{"/dev/zero", "not a regular file"},
                                {fifo.string(), "not a regular file"},
                                {dir.string(), "EISDIR (Is a directory)"},
                                {(dir / "absent.json").string(), "ENOENT (No such file or directory)"}};
  for (const auto& c : cases) {
    CAPTURE(c.path);
    for (const std::string cmd : {"bind", "topo"}) {
      std::vector<std::string> args{cmd, "--topology", c.path};
      if (cmd == "bind") args.insert(args.end(), {"--gpu", "0"});
      Run r = tool(args);
      REQUIRE(r.rc != cli_test::timed_out);
      CHECK(r.rc == 3);
      CHECK(r.one_error_line());
      CHECK(r.err.find("'" + c.path + "'") != std::string::npos);
      CHECK(r.err.find(c.says) != std::string::npos);
    }
  }
}

TEST_CASE("a file above the size cap is refused with the errno's name and text") {
  fs::path root = fresh_root("oversized");
  // 17 MiB: above the 16 MiB cap of every file gpuaff reads.
  cli_test::write_file(root / "sys/devices/system/cpu/online", std::string(17u << 20, '0'));
  Run r = tool({"bind", "--root", root.string(), "--gpu", "0"});
  CHECK(r.rc == 3);
  CHECK(r.one_error_line());
  CHECK(r.err.find("EFBIG (File too large)") != std::string::npos);
  CHECK(r.err.find("errno") == std::string::npos);
}

TEST_CASE("control characters from files, variables and arguments reach stderr escaped") {
  fs::path root = fresh_root("escapes");
  // A terminal escape (ESC [ 2 J: clear the screen) and a DEL inside a node's cpulist.
  cli_test::write_file(root / "sys/devices/system/node/node0/cpulist", "0-1\x1b[2J\x7f\n");
  Run from_file = tool({"bind", "--root", root.string(), "--gpu", "0"});
  CHECK(from_file.rc != 0);
  CHECK(from_file.one_error_line());
  CHECK_FALSE(has_control_byte(from_file.err));
  CHECK(from_file.err.find("\\x1b[2J\\x7f") != std::string::npos);

  fs::path clean = fresh_root("escapes-env");
  Run from_env = tool({"bind", "--root", clean.string(), "--gpu", "0"}, {{"CUDA_VISIBLE_DEVICES", "0\x1b]0;owned\x07"}});
  CHECK(from_env.rc != 0);
  CHECK(from_env.one_error_line());
  CHECK_FALSE(has_control_byte(from_env.err));
  CHECK(from_env.err.find("\\x1b]0;owned\\x07") != std::string::npos);

  Run from_arg = tool({"bind", "--root", clean.string(), "--gpu", "0", "--policy", "node\r\x1b[1A"});
  CHECK(from_arg.rc == 2);
  CHECK(from_arg.one_error_line());
  CHECK_FALSE(has_control_byte(from_arg.err));
  CHECK(from_arg.err.find("\\x0d\\x1b[1A") != std::string::npos);

  Run command = tool({"\x1b[31mbind"});
  CHECK(command.rc == 2);
  CHECK_FALSE(has_control_byte(command.err));
  CHECK(command.err.find("'\\x1b[31mbind'") != std::string::npos);
}

TEST_CASE("empty paths and zero counts are usage errors naming the option, never a default") {
  fs::path root = fresh_root("empty-zero");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  // Each of these once ran: --root '' read the live machine, --nproc 0 and
  // --max-cores 0 meant "all" and "no limit".
  const std::vector<Case> cases{
      {{"topo", "--root", ""}, "--root"},
      {{"bind", "--root", "", "--gpu", "0"}, "--root"},
      {{"exec", "--root", "", "--gpu", "0", "--", "true"}, "--root"},
      {{"record", "--root", "", "--out", (cli_test::temp_dir("empty-out") / "r").string()}, "--root"},
      {{"record", "--out", ""}, "--out"},
      {{"bind", "--topology", "", "--gpu", "0"}, "--topology"},
      {{"bind", "--root", root.string(), "--gpu", "0", "--nproc", "0"}, "--nproc"},
      {{"bind", "--root", root.string(), "--gpu", "0", "--policy", "single", "--max-cores", "0"}, "--max-cores"},
      {{"topo", "--root", root.string(), "--nproc", "00"}, "--nproc"},
      {{"exec", "--root", root.string(), "--gpu", "0", "--max-cores", "0", "--", "true"}, "--max-cores"},
      {{"exec", "--root", root.string(), "--gpu", "0", "--nproc", "0", "--fallback", "unbound", "--", "true"},
       "--nproc"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    Run r = tool(c.args);
    CHECK(r.rc == 2);
    CHECK(r.one_error_line());
    CHECK(r.err.find(c.says) != std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("a GPU index too large for any machine says it is out of range and names the limit") {
  fs::path root = fresh_root("big-index");
  // Beyond an int: refused while parsing, with the largest index accepted.
  Run huge = tool({"bind", "--root", root.string(), "--gpu", "99999999999"});
  CHECK(huge.rc == 2);
  CHECK(huge.one_error_line());
  CHECK(huge.err.find("out of range") != std::string::npos);
  CHECK(huge.err.find("2147483647") != std::string::npos);
  // An int, but no such GPU: the machine's two GPUs are named.
  Run big = tool({"bind", "--root", root.string(), "--gpu", "1000000000"});
  CHECK(big.rc == 4);
  CHECK(big.one_error_line());
  CHECK(big.err.find("no GPU 1000000000") != std::string::npos);
  CHECK(big.err.find("2 visible") != std::string::npos);
  CHECK(big.err.find("non-negative integer") == std::string::npos);
}

namespace {

/// Every regular file under `dir` with its content, for "nothing changed" checks.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[e.path().string()] = cli_test::slurp(e.path().string());
  return files;
}

}  // namespace

TEST_CASE("record --force replaces links planted at files in --out and never writes through them") {
  fs::path root = fresh_root("force-files");
  fs::path base = cli_test::temp_dir("force-files-out");
  fs::path out = base / "rec";
  REQUIRE(tool({"record", "--root", root.string(), "--out", out.string()}).rc == 0);
  // Outside --out: a file a symlink points at and one a hard link shares.
  cli_test::write_file(base / "outside/victim", "precious\n");
  cli_test::write_file(base / "outside/shared", "precious too\n");
  fs::remove(out / "sys/devices/system/cpu/online");
  fs::create_symlink(base / "outside/victim", out / "sys/devices/system/cpu/online");
  fs::remove(out / "proc/self/status");
  fs::create_hard_link(base / "outside/shared", out / "proc/self/status");
  auto before = snapshot(base / "outside");

  Run r = tool({"record", "--root", root.string(), "--out", out.string(), "--force"});
  CHECK(r.rc == 0);
  CHECK(snapshot(base / "outside") == before);
  // The recording holds the root's files again, as regular files.
  CHECK_FALSE(fs::is_symlink(out / "sys/devices/system/cpu/online"));
  CHECK(cli_test::slurp((out / "sys/devices/system/cpu/online").string()) == "0-1\n");
  CHECK(fs::hard_link_count(out / "proc/self/status") == 1);
  CHECK(tool({"topo", "--root", out.string()}).rc == 0);
}

TEST_CASE("record records a root with a broken file no answer needs as a whole, with a note naming it") {
  // cpu0's sibling lists garbled: only the policies that need cores depend on them.
  fs::path root = fresh_root("broken-siblings");
  for (const char* f : {"core_cpus_list", "thread_siblings_list"})
    cli_test::write_file(root / "sys/devices/system/cpu/cpu0/topology" / f, "x\n");
  fs::path out = cli_test::temp_dir("broken-siblings-out") / "rec";
  Run r = tool({"record", "--root", root.string(), "--out", out.string()});
  CHECK(r.rc == 0);
  bool noted = false;
  for (const auto& line : r.err_lines())
    noted = noted || (line.rfind("gpuaff: note: core siblings left out", 0) == 0 &&
                      line.find("cpu0/topology/core_cpus_list") != std::string::npos);
  CHECK_MESSAGE(noted, r.err);
  // The recording holds the broken file as it was: node binds, exclusive says which file.
  CHECK(cli_test::slurp((out / "sys/devices/system/cpu/cpu0/topology/core_cpus_list").string()) == "x\n");
  CHECK(tool({"bind", "--root", out.string(), "--gpu", "0", "--policy", "node"}).rc == 0);
  Run ex = tool({"bind", "--root", out.string(), "--gpu", "0", "--policy", "exclusive"});
  CHECK(ex.rc == 3);
  CHECK(ex.err.find("cpu0/topology/core_cpus_list") != std::string::npos);
}

TEST_CASE("record --force refuses a link planted at a directory in --out, whatever its depth") {
  // A link at each depth of the paths the recording writes, to a directory outside.
  for (const std::string planted : {"sys", "sys/devices/system", "sys/devices/system/node/node0", "proc/self"}) {
    CAPTURE(planted);
    fs::path root = fresh_root("force-dirs");
    fs::path base = cli_test::temp_dir("force-dirs-out");
    fs::path out = base / "rec";
    REQUIRE(tool({"record", "--root", root.string(), "--out", out.string()}).rc == 0);
    // The outside directory has the files the link replaces, each holding
    // other text, so that a write through the link would change them.
    fs::copy(out / planted, base / "outside", fs::copy_options::recursive);
    for (const auto& [path, text] : snapshot(base / "outside")) cli_test::write_file(path, "precious\n");
    fs::remove_all(out / planted);
    fs::create_directory_symlink(base / "outside", out / planted);
    auto before = snapshot(base / "outside");
    auto mtime = fs::last_write_time(base / "outside");

    Run r = tool({"record", "--root", root.string(), "--out", out.string(), "--force"});
    CHECK(r.rc == 3);
    CHECK(r.one_error_line());
    CHECK(r.err.find("refusing to write through the symlink '" + (out / planted).string() + "'") != std::string::npos);
    CHECK(snapshot(base / "outside") == before);
    CHECK(fs::last_write_time(base / "outside") == mtime);  // nothing created there either
  }
}

TEST_CASE("record keeps a file's permission bits, never wider than 0644") {
  fs::path root = fresh_root("modes");
  fs::path out = cli_test::temp_dir("modes-out") / "rec";
  // Owner-only in the root: the recording must not make it readable by others.
  fs::permissions(root / "sys/devices/system/cpu/online", fs::perms::owner_read | fs::perms::owner_write);
  // Executable and world-writable in the root: the recording drops both.
  fs::permissions(root / "sys/devices/system/node/node0/cpulist", fs::perms::all);
  REQUIRE(tool({"record", "--root", root.string(), "--out", out.string()}).rc == 0);
  auto mode = [&](const std::string& rel) { return fs::status(out / rel).permissions() & fs::perms::mask; };
  CHECK(mode("sys/devices/system/cpu/online") == (fs::perms::owner_read | fs::perms::owner_write));
  CHECK((mode("sys/devices/system/node/node0/cpulist") & ~(fs::perms::owner_read | fs::perms::owner_write |
                                                           fs::perms::group_read | fs::perms::others_read)) ==
        fs::perms::none);
}

TEST_CASE("a result that cannot be written (a full disk) is an error, never an empty success") {
  // /dev/full refuses every write with ENOSPC: what a script saving a binding on a full disk sees.
  for (std::string command : {"bind --gpu 0", "bind --gpu all --format json", "topo", "topo --format json"}) {
    Run r = cli_test::run_program("/bin/sh", {"-c", cli_test::exe() + " " + command + " --root " +
                                                        gpuaff_test::fixture("dgx-h100") + " >/dev/full"});
    INFO(command, ": ", r.err);
    CHECK(r.rc == 6);
    CHECK(r.one_error_line());
    CHECK(r.err.find("cannot write the result to stdout: ENOSPC") != std::string::npos);
  }
}

TEST_CASE("record --out FILE.tar opens nothing planted beside it: a FIFO or a hard link named like its scratch file") {
  fs::path root = fresh_root("record-beside");
  for (bool fifo : {true, false}) {
    fs::path dir = cli_test::temp_dir(fifo ? "record-beside-fifo" : "record-beside-link");
    fs::path tar = dir / "node.tar";
    // FILE.tar.partial: the name the archive was once written through.
    fs::path planted = dir / "node.tar.partial";
    fs::path victim = dir / "victim";
    cli_test::write_file(victim, "keep me\n");
    if (fifo) REQUIRE(::mkfifo(planted.c_str(), 0644) == 0);
    else fs::create_hard_link(victim, planted);
    Run r = tool({"record", "--root", root.string(), "--out", tar.string()});
    INFO(r.err);
    CHECK(r.rc == 0);  // run_tool's 30 s kill makes a hang fail
    CHECK(fs::is_regular_file(tar));
    CHECK(fs::file_size(tar) > 0);
    CHECK(cli_test::slurp(victim.string()) == "keep me\n");
    CHECK((fifo ? fs::is_fifo(planted) : fs::hard_link_count(victim) == 2));
    // Nothing else is left beside it: no scratch recording, no partial archive.
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    CHECK(left == std::vector<std::string>{"node.tar", "node.tar.partial", "victim"});
  }
}

TEST_CASE("an interrupted record --out FILE.tar leaves no scratch recording behind") {
  fs::path root = fresh_root("record-signal");
  fs::path dir = cli_test::temp_dir("record-signal-out");
  std::string exe = cli_test::exe();
  std::string out = (dir / "node.tar").string();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(exe.c_str(), exe.c_str(), "record", "--root", root.c_str(), "--out", out.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Interrupt it as soon as its scratch folder appears (or it has finished).
  for (int i = 0; i < 5000; ++i) {
    bool scratch = false;
    for (const auto& e : fs::directory_iterator(dir)) scratch |= e.path().filename().string().rfind(".gpuaff-record-", 0) == 0;
    if (scratch) break;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      break;
    }
    ::usleep(200);
  }
  if (pid > 0) {
    ::kill(pid, SIGINT);
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK((WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0)));
  }
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    CHECK_MESSAGE(name.rfind(".gpuaff-record-", 0) != 0, name);
    CHECK_MESSAGE(name.find(".partial") == std::string::npos, name);
  }
}

TEST_CASE("SIGINT stops record at once, mid-recording, and leaves nothing: no output, no scratch, no partial file") {
  // big-1152 (32,380 files) takes seconds to record: the signal comes while
  // it copies. It used to be held off until the archive was written (and
  // then the archive stayed); a folder was left half written.
  fs::path root = gpuaff_test::fixture("big-1152");
  std::string exe = cli_test::exe();
  for (std::string name : {"node.tar", "node"}) {
    fs::path dir = cli_test::temp_dir("record-stop-" + name);
    std::string out = (dir / name).string();
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::execl(exe.c_str(), exe.c_str(), "record", "--root", root.c_str(), "--out", out.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    bool started = false;
    for (int i = 0; i < 20000 && !started; ++i) {
      for (const auto& e : fs::directory_iterator(dir))
        started = started || e.path().filename().string().rfind(".gpuaff-record-", 0) == 0;
      if (!started) ::usleep(1000);
    }
    CHECK(started);
    ::usleep(200000);  // into the copying
    auto sent = std::chrono::steady_clock::now();
    ::kill(pid, SIGINT);
    int status = 0;
    ::waitpid(pid, &status, 0);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    INFO(name, ": ended ", took, " s after SIGINT");
    CHECK(WIFSIGNALED(status));
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGINT));
    CHECK(took < 10.0);  // the removal of a part-written recording included, on a loaded machine
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
    CHECK(left.empty());
  }
}

TEST_CASE("record --out DIR: a new folder, DIR/ with its slash, an empty folder (kept mode) and a link to one") {
  fs::path root = fresh_root("record-places");
  fs::path dir = cli_test::temp_dir("record-places-out");
  fs::create_directories(dir / "empty");
  fs::permissions(dir / "empty", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  fs::create_directories(dir / "real");
  fs::create_directory_symlink("real", dir / "link");
  for (const std::string& out : {(dir / "new").string(), (dir / "slash").string() + "/", (dir / "empty").string(),
                                 (dir / "empty2").string() + "//", (dir / "link").string()}) {
    Run r = tool({"record", "--root", root.string(), "--out", out});
    INFO(out, ": ", r.err);
    CHECK(r.rc == 0);
  }
  for (const char* name : {"new", "slash", "empty", "empty2", "real"})
    CHECK_MESSAGE(fs::is_regular_file(dir / name / "proc/self/status"), name);
  CHECK(fs::is_symlink(dir / "link"));
  CHECK(fs::status(dir / "empty").permissions() ==
        (fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec));
  // Nothing else beside them: no scratch folder left.
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"empty", "empty2", "link", "new", "real", "slash"});
}

TEST_CASE("record's replay hint is shell-quoted: a pasted hint runs nothing a name smuggled in") {
  fs::path root = fresh_root("record-quote");
  fs::path dir = cli_test::temp_dir("record-quote-out");
  fs::path out = dir / "node;$(id)'x";
  Run r = tool({"record", "--root", root.string(), "--out", out.string()});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  // The hint names the folder as one single-quoted word ('\'' for the quote inside).
  CHECK(r.out.find("replay with: gpuaff topo --root '" + dir.string() + "/node;$(id)'\\''x'\n") != std::string::npos);
  // And a shell reading that word gets the folder back, running nothing.
  std::string hint = r.out.substr(r.out.find("--root ") + 7);
  hint.pop_back();
  Run sh = cli_test::run_program("/bin/sh", {"-c", "printf '%s' " + hint});
  CHECK(sh.out == out.string());
}

TEST_CASE("a NUMA node id beyond any Linux machine is refused, and a too long command name says so") {
  fs::path root = fresh_root("limits");
  Run node = tool({"bind", "--root", root.string(), "--gpu", "0", "--unknown-node", "99999"});
  CHECK(node.rc == 2);
  CHECK(node.err.find("--unknown-node 99999 is beyond the largest NUMA node id") != std::string::npos);
  Run longname = tool({"exec", "--gpu", "0", "--root", root.string(), "--fallback", "unbound", "--", std::string(5000, 'x')});
  CHECK(longname.rc == 126);
  CHECK(longname.err.find("ENAMETOOLONG") != std::string::npos);
  CHECK(longname.err.find("longer than the system allows") != std::string::npos);
}

TEST_CASE("topo's text holds no control byte from the recording: a GPU UUID with a terminal escape is shown escaped") {
  // The NVIDIA information file is the recording's: an OSC sequence in the
  // UUID would set the window title (or worse) on the terminal of whoever
  // looks at a bug report.
  fs::path root = cli_test::temp_dir("uuid-escape");
  fs::copy(gpuaff_test::fixture("dgx-h100"), root, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  cli_test::write_file(root / "proc/driver/nvidia/gpus/0000:1b:00.0/information",
                       "Model: \t H100\nGPU UUID: \t GPU-\x1b]0;owned\x07-aaaa\n");
  Run r = tool({"topo", "--root", root.string()});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(!has_control_byte(r.out));
  CHECK(r.out.find("GPU-\\x1b]0;owned\\x07-aaaa") != std::string::npos);
}

TEST_CASE("dgx-h100 with node 1's cpulist emptied: GPU 4's binding names the lost list; GPU 0's goes ahead") {
  // An empty cpulist with CPUs 56-111,168-223 in no node is a lost list, not
  // a memory-only node: GPU 4's binding said "no allowed CPU; allow some CPUs
  // of that node (taskset, cgroup cpuset)", and --fallback unbound ran it.
  fs::path root = cli_test::temp_dir("lost-cpulist");
  fs::copy(gpuaff_test::fixture("dgx-h100"), root, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  cli_test::write_file(root / "sys/devices/system/node/node1/cpulist", "");
  for (const char* policy : {"node", "exclusive", "unique-contiguous"}) {
    Run r = tool({"bind", "--root", root.string(), "--gpu", "4", "--policy", policy});
    INFO(policy, ": ", r.err);
    CHECK(r.rc == 3);
    CHECK(r.one_error_line());
    CHECK(r.err.find("GPU 4 (0000:9d:00.0) is on NUMA node 1, whose cpulist (sys/devices/system/node/node1/cpulist)") !=
          std::string::npos);
    CHECK(r.err.find("online CPUs 56-111,168-223 are in no node's cpulist: that list was lost") != std::string::npos);
  }
  Run ok = tool({"bind", "--root", root.string(), "--gpu", "0"});
  INFO(ok.err);
  CHECK(ok.rc == 0);
  CHECK(ok.out == "0-55,112-167\n");
}

TEST_CASE("topo --topology FILE.json shows the file's notes escaped, as a recording's text") {
  // The notes of a JSON topology are its author's text: a terminal escape or
  // a bidi override in one must not reach the terminal as it is.
  Run json = tool({"topo", "--root", gpuaff_test::fixture("dgx-h100"), "--format", "json"});
  REQUIRE(json.rc == 0);
  std::size_t at = json.out.find("\"notes\": [");
  REQUIRE(at != std::string::npos);
  std::string rest = json.out.substr(at + 10);
  std::string text = json.out.substr(0, at) + "\"notes\": [\"title \\u001b]0;owned\\u0007 here\", \"\\u202eevil\"" +
                     (rest.find_first_not_of(" \n") != std::string::npos && rest[rest.find_first_not_of(" \n")] == ']'
                          ? ""
                          : ", ") +
                     rest;
  fs::path dir = cli_test::temp_dir("json-notes");
  cli_test::write_file(dir / "t.json", text);
  Run r = tool({"topo", "--topology", (dir / "t.json").string()});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(!has_control_byte(r.out));
  CHECK(r.out.find("  - title \\x1b]0;owned\\x07 here\n") != std::string::npos);
  CHECK(r.out.find("  - \\xe2\\x80\\xaeevil\n") != std::string::npos);
  CHECK(r.out.find("\xe2\x80\xae") == std::string::npos);
}

TEST_CASE("--flag=true and --flag=false on a flag mean what they say; any other value is refused naming the flag") {
  // Each of these was once read as the flag given: --force=false overwrote a
  // non-empty folder, --nic-env=false exported NIC variables, --dry-run=false
  // still printed the plan and ran nothing.
  fs::path root = fresh_root("flag-values");
  fs::path out = cli_test::temp_dir("flag-values-out") / "rec";
  REQUIRE(tool({"record", "--root", root.string(), "--out", out.string()}).rc == 0);
  auto before = snapshot(out);
  Run not_forced = tool({"record", "--root", root.string(), "--out", out.string(), "--force=false"});
  CHECK(not_forced.rc == 2);
  CHECK(not_forced.one_error_line());
  CHECK(not_forced.err.find("--force") != std::string::npos);  // the refusal of a non-empty folder
  CHECK(snapshot(out) == before);
  CHECK(tool({"record", "--root", root.string(), "--out", out.string(), "--force=true"}).rc == 0);

  std::string dgx = gpuaff_test::fixture("dgx-h100");
  auto nic_env = [&](const std::string& flag) {
    std::vector<std::string> args{"bind", "--root", dgx, "--gpu", "0", "--format", "json"};
    if (!flag.empty()) args.push_back(flag);
    Run r = tool(args);
    INFO(flag, ": ", r.err);
    CHECK(r.rc == 0);
    return r.out;
  };
  CHECK(nic_env("--nic-env") != nic_env(""));  // the test means something: the fixture has NICs
  CHECK(nic_env("--nic-env=false") == nic_env(""));
  CHECK(nic_env("--nic-env=true") == nic_env("--nic-env"));

  if (cli_test::cpus_allowed_here({0, 1})) {
    Run ran = tool({"exec", "--root", root.string(), "--gpu", "0", "--policy", "exclusive", "--dry-run=false", "--",
                    "echo", "ran"});
    INFO(ran.err);
    CHECK(ran.rc == 0);
    CHECK(ran.out == "ran\n");
  }
  Run dry = tool({"exec", "--root", root.string(), "--gpu", "0", "--dry-run=true", "--", "echo", "ran"});
  CHECK(dry.rc == 0);
  CHECK(dry.out != "ran\n");  // the plan, not the command's output
  CHECK(dry.out.find("\"command\"") != std::string::npos);

  Run all_off = tool({"doctor", "--all=false"});
  CHECK(all_off.rc == 2);
  CHECK(all_off.err.find("doctor needs --pid") != std::string::npos);

  // Anything but true or false: a usage error naming the flag, the value and what is valid.
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"record", "--root", root.string(), "--out", out.string(), "--force=yes"},
           {"bind", "--root", dgx, "--gpu", "0", "--nic-env=0"},
           {"exec", "--root", root.string(), "--gpu", "0", "--dry-run=maybe", "--", "true"},
           {"bind", "--root", dgx, "--gpu", "0", "--no-balanced=off"}}) {
    CAPTURE(args);
    Run r = tool(args);
    std::string written;
    for (const auto& a : args)
      if (a.find('=') != std::string::npos && a.rfind("--", 0) == 0) written = a;
    CHECK(r.rc == 2);
    CHECK(r.one_error_line());
    CHECK(r.err.find(written) != std::string::npos);
    CHECK(r.err.find("true or false") != std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("--help and --version that cannot be written (a full disk) are an error, never a silent success") {
  // `gpuaff --version` alone answers before the parser; the others go through it.
  for (std::string args : {"--help", "bind --help", "doctor --help", "--version bind", "--version"}) {
    Run r = cli_test::run_program("/bin/sh", {"-c", cli_test::exe() + " " + args + " >/dev/full"});
    INFO(args, ": ", r.err);
    CHECK(r.rc == 6);
    CHECK(r.one_error_line());
    CHECK(r.err.find("cannot write the result to stdout: ENOSPC") != std::string::npos);
  }
}

TEST_CASE("--help=VALUE and --version=VALUE are refused: the answer would not depend on VALUE") {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--help=false"}, {"bind", "--help=false"}, {"--version=false"}, {"topo", "--help=no"}}) {
    CAPTURE(args);
    Run r = tool(args);
    CHECK(r.rc == 2);
    CHECK(r.one_error_line());
    CHECK(r.err.find(args.back()) != std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("a recording that lost the node of a GPU is refused, naming the node, never bound to another socket") {
  // dgx-h100 cut to node 0: GPUs 4-7 say numa_node 1, which the root no longer
  // has. Once GPU 4 was bound to node 0's CPUs (0-55,112-167) with exit 0.
  fs::path root = cli_test::temp_dir("lost-node1") / "root";
  fs::copy(gpuaff_test::fixture("dgx-h100"), root, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::remove_all(root / "sys/devices/system/node/node1");
  for (const char* list : {"online", "possible", "has_cpu", "has_memory"})  // cut before node 1 too
    cli_test::write_file(root / "sys/devices/system/node" / list, "0\n");
  for (const char* gpu : {"4", "all"}) {
    Run r = tool({"bind", "--root", root.string(), "--gpu", gpu});
    CAPTURE(gpu);
    CHECK(r.rc == 3);
    CHECK(r.out.empty());
    REQUIRE(r.err_lines().size() == 1);
    CHECK(r.err.find("sys/devices/system/node/node1") != std::string::npos);
    CHECK(r.err.find("numa_node") != std::string::npos);
  }
}
