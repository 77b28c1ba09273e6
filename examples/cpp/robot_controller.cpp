// A robot's controller loop in C++: MuJoCo's C API steps the robot, libtorch runs the exported
// policy, and everything the loop needs to know comes from the export's metadata.json: where each
// observation element is read (robot.observation_sources: sensors, sites, bodies, joints, free
// joints, the controller's own state, histories of readings), the joints in action order, how an
// action becomes the targets (robot.action_rule), the PD gains and the control period.
//
//   robot_controller <policy.pt> <robot.xml> [--keyframe home] [--command vx vy wz]
//                    [--steps 500] [--gait-frequency 1.5] [--trace]
//
// Prints the contract it read, then (with --trace) one line per control step with the observation
// and the action (%.9g, so float32 values round-trip), and at the end, for a policy that reads a
// command, the tracking error: the commanded against the measured planar velocity and yaw rate,
// and whether the robot fell (the IMU's up axis pointing down). ppo_control.deploy.controller is the
// same loop in Python, with the same arithmetic in the same order, so both give the same
// observations and actions.
#include <mujoco/mujoco.h>
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "json_lite.h"

namespace {

// robot.action_rule: how a clipped action becomes the actuators' targets.
enum class ActionRule {
  DefaultPose,     // default_pose + action_scale * action (MuJoCo clamps it to the ctrlrange)
  PreviousTarget,  // clip(previous target + action_scale * action, ctrl_range), from initial_target after a reset
};

struct Contract {
  ActionRule action_rule = ActionRule::DefaultPose;
  std::vector<std::string> joint_names;
  std::vector<double> default_pose;        // empty where the export has none (the previous_target rule)
  std::vector<double> initial_target;      // empty where none: the targets at rest are then the default pose
  std::vector<double> ctrl_low, ctrl_high;  // empty where the export has no robot.ctrl_range
  std::vector<double> kp, joint_damping, actuator_damping, action_low, action_high;
  double action_scale = 0.0, sim_period_s = 0.0, control_period_s = 0.0;
  int sim_substeps = 0;
  std::vector<std::string> elements, command_names;
  std::vector<double> gait_initial_rad;
  bool gait_holds = false;  // every foot's phase is held after an advance while the command is (near) zero
  double gait_hold_rad = 0.0;
  double gait_hold_command_norm = 0.0;
  json_lite::Value sources;
};

ActionRule read_action_rule(const json_lite::Value& robot) {
  // An export written before the field existed holds the legged robots' rule.
  const std::string rule = robot.has("action_rule") ? robot.at("action_rule").as_string() : "default_pose";
  if (rule == "default_pose") return ActionRule::DefaultPose;
  if (rule == "previous_target") return ActionRule::PreviousTarget;
  throw std::runtime_error("robot.action_rule is " + rule + ": this controller drives default_pose and previous_target");
}

// robot.ctrl_range: one [low, high] per joint.
void read_ctrl_range(const json_lite::Value& ranges, std::size_t n, Contract& c) {
  if (ranges.array.size() != n) throw std::runtime_error("robot.ctrl_range is not one [low, high] for each joint");
  for (const json_lite::Value& range : ranges.array) {
    const std::vector<double> bounds = range.as_numbers(2);
    c.ctrl_low.push_back(bounds[0]);
    c.ctrl_high.push_back(bounds[1]);
  }
}

Contract read_contract(const json_lite::Value& meta) {
  const json_lite::Value& robot = meta.at("robot");
  Contract c;
  c.joint_names = robot.at("joint_names").as_strings();
  const std::size_t n = c.joint_names.size();
  c.action_rule = read_action_rule(robot);
  const bool incremental = c.action_rule == ActionRule::PreviousTarget;
  // at() refuses a missing field by name: each rule's own fields are required, the others optional.
  if (!incremental || robot.has("default_pose")) c.default_pose = robot.at("default_pose").as_numbers(n);
  if (incremental || robot.has("initial_target")) c.initial_target = robot.at("initial_target").as_numbers(n);
  if (incremental || robot.has("ctrl_range")) read_ctrl_range(robot.at("ctrl_range"), n, c);
  c.kp = robot.at("kp").as_numbers(n);
  c.joint_damping = robot.at("kd_parts").at("joint_damping").as_numbers(n);
  c.actuator_damping = robot.at("kd_parts").at("actuator_damping").as_numbers(n);
  c.action_scale = robot.at("action_scale").as_number();
  c.sim_period_s = robot.at("sim_period_s").as_number();
  c.control_period_s = robot.at("control_period_s").as_number();
  c.sim_substeps = static_cast<int>(robot.at("sim_substeps").as_number());
  c.sources = robot.at("observation_sources");
  if (robot.has("command_names")) c.command_names = robot.at("command_names").as_strings();
  if (robot.has("gait_phase")) {
    const json_lite::Value& gait = robot.at("gait_phase");
    for (const auto& v : gait.at("initial_rad").array) c.gait_initial_rad.push_back(v.as_number());
    if (gait.has("hold_rad")) {
      c.gait_holds = true;
      c.gait_hold_rad = gait.at("hold_rad").as_number();
      c.gait_hold_command_norm = gait.at("hold_while_command_norm_at_most").as_number();
    }
  }
  c.action_low = meta.at("action_low").as_numbers(n);
  c.action_high = meta.at("action_high").as_numbers(n);
  const json_lite::Value& groups = meta.at("observation").at("groups");
  const json_lite::Value* policy = &groups.array.at(0);
  for (const auto& g : groups.array) {
    if (g.has("name") && g.at("name").as_string() == "policy") policy = &g;
  }
  c.elements = policy->at("element_names").as_strings();
  return c;
}

// The targets before the first action: robot.initial_target where the export has one (the
// previous_target rule's, or the zeros Spot's reset writes), else the default pose.
std::vector<double> resting_target(const Contract& c) {
  return c.initial_target.empty() ? c.default_pose : c.initial_target;
}

// The quantities a real cell's perception supplies (in simulation read from the model's state).
std::vector<std::string> perception_inputs(const Contract& c) {
  std::vector<std::string> keys;
  for (const auto& [key, source] : c.sources.object) {
    if (source.has("input") && source.at("input").as_string() == "perception") keys.push_back(key);
  }
  return keys;
}

int index_of(const std::vector<std::string>& names, const std::string& name, const std::string& what) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  throw std::runtime_error(what + " has no '" + name + "'");
}

// (the key of robot.observation_sources that says where `element` is read, the rest of its name):
// the longest prefix of its ':'-separated parts that has a source, so `qpos:box:x` reads `qpos:box`
// (rest `x`) before `qpos`, as ppo_control's source_of.
std::pair<std::string, std::string> source_key(const std::string& element, const json_lite::Value& sources) {
  for (std::size_t colon = element.rfind(':'); colon != std::string::npos && colon > 0; colon = element.rfind(':', colon - 1)) {
    const std::string key = element.substr(0, colon);
    if (sources.has(key)) return {key, element.substr(colon + 1)};
  }
  throw std::runtime_error("robot.observation_sources does not say where " + element.substr(0, element.find(':')) + " (element " + element +
                           ") is read");
}

int axis(const std::string& key) {
  if (key == "x") return 0;
  if (key == "y") return 1;
  if (key == "z") return 2;
  throw std::runtime_error("unknown axis '" + key + "'");
}

// A rotation matrix's entry "rc" (row, column) in its row-major 9 values.
int matrix_entry(const std::string& key) {
  if (key.size() != 2 || key[0] < '0' || key[0] > '2' || key[1] < '0' || key[1] > '2') {
    throw std::runtime_error("unknown rotation matrix entry '" + key + "' (row and column, 0 to 2)");
  }
  return 3 * (key[0] - '0') + (key[1] - '0');
}

int require(const mjModel* m, mjtObj type, const std::string& name) {
  const int id = mj_name2id(m, type, name.c_str());
  if (id < 0) throw std::runtime_error("the model has no '" + name + "'");
  return id;
}

using Reader = std::function<double(const mjData*)>;

// One element key's readings of a source over the controller's observations, newest first; zeros
// stand for the readings before the episode's first.
struct History {
  Reader read;
  std::vector<double> values{0.0};

  void record(const mjData* d) {
    const double now = read(d);
    std::copy_backward(values.begin(), values.end() - 1, values.end());
    values.front() = now;
  }
};

// The controller: gains and timing written into the model, one reader per observation element,
// and the state the policy saw in training besides the sensors (previous action, targets,
// command, gait clock, histories of readings).
class Controller {
 public:
  Controller(mjModel* m, const Contract& c, std::vector<double> command, double gait_frequency_hz)
      : m_(m), c_(c), command_(std::move(command)), phase_(c.gait_initial_rad) {
    const int n = static_cast<int>(c.joint_names.size());
    if (m->nu != n) throw std::runtime_error("the model's actuators and the export's joint_names differ in number");
    for (int i = 0; i < n; ++i) {
      const int joint = require(m, mjOBJ_JOINT, c.joint_names[i]);
      if (m->actuator_trnid[2 * i] != joint) throw std::runtime_error("actuator " + std::to_string(i) + " does not drive " + c.joint_names[i]);
      m->actuator_gainprm[i * mjNGAIN] = c.kp[i];
      m->actuator_biasprm[i * mjNBIAS + 0] = 0.0;
      m->actuator_biasprm[i * mjNBIAS + 1] = -c.kp[i];
      m->actuator_biasprm[i * mjNBIAS + 2] = -c.actuator_damping[i];
      m->dof_damping[m->jnt_dofadr[joint]] = c.joint_damping[i];
    }
    m->opt.timestep = c.sim_period_s;
    previous_.assign(n, 0.0);
    pending_.assign(n, 0.0);
    target_ = resting_target(c);
    if (target_.empty()) target_.assign(n, 0.0);
    held_target_ = target_;
    phase_step_ = 2.0 * M_PI * c.control_period_s * gait_frequency_hz;
    if (!phase_.empty() && gait_frequency_hz <= 0.0) throw std::runtime_error("this policy reads a gait clock: give --gait-frequency");
    for (const std::string& e : c.elements) readers_.push_back(reader(e));
  }

  // The policy's observation now (after the keyframe, then once per control period after the
  // physics steps). Histories record this period's reading first; the controller's own state
  // lags one control period, as in training: it moves on after it is read.
  std::vector<float> observe(const mjData* d) {
    for (auto& [name, history] : histories_) history.record(d);
    std::vector<float> obs;
    for (const auto& read : readers_) obs.push_back(static_cast<float>(read(d)));
    if (stepped_) {
      previous_ = pending_;
      for (double& p : phase_) p = std::fmod(p + phase_step_ + M_PI, 2.0 * M_PI) - M_PI;
      double norm = 0.0;
      for (double v : command_) norm += v * v;
      if (c_.gait_holds && std::sqrt(norm) <= c_.gait_hold_command_norm) {
        for (double& p : phase_) p = c_.gait_hold_rad;
      }
      stepped_ = false;
    }
    return obs;
  }

  // Writes the action's targets into ctrl; `held_target_` is what the actuators hold: the targets
  // within robot.ctrl_range, where MuJoCo clamps them.
  void act(const std::vector<float>& action, mjData* d) {
    if (action.size() != target_.size()) throw std::runtime_error("the policy's action and the export's joint_names differ in size");
    for (std::size_t i = 0; i < action.size(); ++i) {
      const double a = std::min(std::max(static_cast<double>(action[i]), c_.action_low[i]), c_.action_high[i]);
      pending_[i] = a;
      target_[i] = next_target(i, a);
      held_target_[i] = c_.ctrl_low.empty() ? target_[i] : std::min(std::max(target_[i], c_.ctrl_low[i]), c_.ctrl_high[i]);
      d->ctrl[i] = target_[i];
    }
    stepped_ = true;
  }

  void step_physics(mjData* d) const {
    for (int i = 0; i < c_.sim_substeps; ++i) mj_step(m_, d);
  }

 private:
  mjModel* m_;
  const Contract& c_;
  std::vector<double> command_, phase_, previous_, pending_, target_, held_target_;
  double phase_step_ = 0.0;
  bool stepped_ = false;
  std::map<std::string, History> histories_;  // (inner source, element key) -> its readings; map nodes stay put
  std::vector<Reader> readers_;

  // robot.action_rule's target for joint i under the clipped action a (the previous_target rule's
  // targets are the next action's starting point, so they are clipped here).
  double next_target(std::size_t i, double a) const {
    if (c_.action_rule == ActionRule::PreviousTarget) {
      return std::min(std::max(target_[i] + a * c_.action_scale, c_.ctrl_low[i]), c_.ctrl_high[i]);
    }
    return c_.default_pose[i] + c_.action_scale * a;
  }

  Reader reader(const std::string& element) {
    const auto [quantity, key] = source_key(element, c_.sources);
    return read(c_.sources.at(quantity), quantity, key, element);
  }

  // The reader of `source` for the element `element` (`quantity`:`key`); a "minus" source is read
  // as the difference of the source without it and the one it names, in that order.
  Reader read(const json_lite::Value& source, const std::string& quantity, const std::string& key, const std::string& element) {
    if (source.has("history")) return history_reader(source, quantity, key, element);
    if (source.has("minus")) {
      json_lite::Value plus_source = source;
      plus_source.object.erase("minus");
      const Reader plus = read(plus_source, quantity, key, element), minus = read(source.at("minus"), quantity, key, element);
      return [plus, minus](const mjData* d) { return plus(d) - minus(d); };
    }
    if (source.has("sensor")) {
      const int adr = m_->sensor_adr[require(m_, mjOBJ_SENSOR, source.at("sensor").as_string())] + axis(key);
      return [adr](const mjData* d) { return d->sensordata[adr]; };
    }
    if (source.has("site_gravity")) {
      const int site = require(m_, mjOBJ_SITE, source.at("site_gravity").as_string()), k = axis(key);
      return [site, k](const mjData* d) { return -d->site_xmat[9 * site + 6 + k]; };
    }
    if (source.has("site_pos") || source.has("site_xmat") || source.has("body_pos") || source.has("body_xmat")) return frame_reader(source, key);
    if (source.has("free_joint")) return free_joint_reader(source, key);
    if (source.has("joint")) return joint_reader(source, key);
    if (source.has("controller")) return controller_reader(source.at("controller").as_string(), quantity, key, element);
    throw std::runtime_error("robot.observation_sources." + quantity + ": unknown source " + source.dump());
  }

  // A site's or body's world position (key x, y, z) or rotation matrix entry (key "rc").
  Reader frame_reader(const json_lite::Value& source, const std::string& key) const {
    if (source.has("site_pos")) {
      const int site = require(m_, mjOBJ_SITE, source.at("site_pos").as_string()), k = axis(key);
      return [site, k](const mjData* d) { return d->site_xpos[3 * site + k]; };
    }
    if (source.has("site_xmat")) {
      const int site = require(m_, mjOBJ_SITE, source.at("site_xmat").as_string()), k = matrix_entry(key);
      return [site, k](const mjData* d) { return d->site_xmat[9 * site + k]; };
    }
    if (source.has("body_pos")) {
      const int body = require(m_, mjOBJ_BODY, source.at("body_pos").as_string()), k = axis(key);
      return [body, k](const mjData* d) { return d->xpos[3 * body + k]; };
    }
    const int body = require(m_, mjOBJ_BODY, source.at("body_xmat").as_string()), k = matrix_entry(key);
    return [body, k](const mjData* d) { return d->xmat[9 * body + k]; };
  }

  // The body's free joint: key x y z qw qx qy qz of its qpos, or vx vy vz wx wy wz of its qvel.
  Reader free_joint_reader(const json_lite::Value& source, const std::string& key) const {
    const std::string& body = source.at("body").as_string();
    const int joint = m_->body_jntadr[require(m_, mjOBJ_BODY, body)];
    if (joint < 0 || m_->jnt_type[joint] != mjJNT_FREE) throw std::runtime_error("body " + body + " has no free joint of its own");
    const std::string& which = source.at("free_joint").as_string();
    if (which == "qpos") {
      const int adr = m_->jnt_qposadr[joint] + index_of({"x", "y", "z", "qw", "qx", "qy", "qz"}, key, "a free joint's qpos");
      return [adr](const mjData* d) { return d->qpos[adr]; };
    }
    if (which == "qvel") {
      const int dof = m_->jnt_dofadr[joint] + index_of({"vx", "vy", "vz", "wx", "wy", "wz"}, key, "a free joint's qvel");
      return [dof](const mjData* d) { return d->qvel[dof]; };
    }
    throw std::runtime_error("a free_joint source reads qpos or qvel, not " + which);
  }

  // The joint named by the key: qpos, qvel or qpos - default_pose.
  Reader joint_reader(const json_lite::Value& source, const std::string& key) const {
    const int joint = require(m_, mjOBJ_JOINT, key);
    const std::string& how = source.at("joint").as_string();
    if (how == "qvel") {
      const int dof = m_->jnt_dofadr[joint];
      return [dof](const mjData* d) { return d->qvel[dof]; };
    }
    if (how != "qpos" && how != "qpos - default_pose") {
      throw std::runtime_error("a joint source reads qpos, qvel or qpos - default_pose, not " + how);
    }
    double offset = 0.0;
    if (how == "qpos - default_pose") {
      if (c_.default_pose.empty()) throw std::runtime_error("a joint source reads qpos - default_pose: the export has no robot.default_pose");
      offset = c_.default_pose[index_of(c_.joint_names, key, "joint_names")];
    }
    const int adr = m_->jnt_qposadr[joint];
    return [adr, offset](const mjData* d) { return d->qpos[adr] - offset; };
  }

  // The controller's own state: previous action, held targets, command, gait clock.
  Reader controller_reader(const std::string& what, const std::string& quantity, const std::string& key, const std::string& element) {
    if (what == "previous_action") {
      const int i = index_of(c_.joint_names, key, "joint_names");
      return [this, i](const mjData*) { return previous_[i]; };
    }
    if (what == "target") {
      const int i = index_of(c_.joint_names, key, "joint_names");
      return [this, i](const mjData*) { return held_target_[i]; };
    }
    if (what == "command") {
      const int i = index_of(c_.command_names, element, "command_names");
      return [this, i](const mjData*) { return command_.at(i); };
    }
    if (what == "gait_phase_cos" || what == "gait_phase_sin") {
      std::vector<std::string> feet;
      for (const std::string& e : c_.elements) {
        if (e.rfind(quantity + ":", 0) == 0) feet.push_back(e.substr(quantity.size() + 1));
      }
      const int foot = index_of(feet, key, quantity);
      const bool cosine = what == "gait_phase_cos";
      return [this, foot, cosine](const mjData*) { return cosine ? std::cos(phase_[foot]) : std::sin(phase_[foot]); };
    }
    throw std::runtime_error("robot.observation_sources." + quantity + ": unknown controller state " + what);
  }

  // What `source["history"]` read for `key`, `source["age"]` observations ago; the ages of one
  // reading share its record.
  Reader history_reader(const json_lite::Value& source, const std::string& quantity, const std::string& key, const std::string& element) {
    const double age = source.has("age") && source.at("age").kind == json_lite::Value::Kind::Number ? source.at("age").number : -1.0;
    if (age < 0.0 || age != std::floor(age)) {
      throw std::runtime_error("robot.observation_sources." + quantity + ": a history needs an age >= 0 (observations ago)");
    }
    const std::string name = source.at("history").dump() + " " + key;
    auto found = histories_.find(name);
    if (found == histories_.end()) found = histories_.emplace(name, History{read(source.at("history"), quantity, key, element)}).first;
    History* history = &found->second;
    const std::size_t index = static_cast<std::size_t>(age);
    if (history->values.size() <= index) history->values.resize(index + 1, 0.0);
    return [history, index](const mjData*) { return history->values[index]; };
  }
};

void print_values(const char* label, const std::vector<float>& values) {
  std::printf(" %s", label);
  for (float v : values) std::printf(" %.9g", v);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: robot_controller <policy.pt> <robot.xml> [--keyframe home] [--command vx vy wz] "
                 "[--steps 500] [--gait-frequency 1.5] [--trace]\n";
    return 2;
  }
  std::string keyframe = "home";
  std::vector<double> command = {0.0, 0.0, 0.0};
  int steps = 500;
  double gait_frequency = 0.0;
  bool trace = false;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--keyframe" && i + 1 < argc) keyframe = argv[++i];
    else if (arg == "--command" && i + 3 < argc) command = {std::atof(argv[i + 1]), std::atof(argv[i + 2]), std::atof(argv[i + 3])}, i += 3;
    else if (arg == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (arg == "--gait-frequency" && i + 1 < argc) gait_frequency = std::atof(argv[++i]);
    else if (arg == "--trace") trace = true;
    else {
      std::cerr << "error: unknown argument " << arg << "\n";
      return 2;
    }
  }
  try {
    at::set_num_threads(1);  // one thread: the same arithmetic as a one-thread Python run
    torch::jit::ExtraFilesMap extra{{"metadata.json", ""}};
    torch::jit::Module policy = torch::jit::load(argv[1], torch::kCPU, extra);
    policy.eval();
    // A new episode: a policy with history or memory forgets it (exports made before reset() existed have none).
    if (policy.find_method("reset")) policy.get_method("reset")({});
    const Contract contract = read_contract(json_lite::parse(extra["metadata.json"]));

    char error[1000] = "";
    mjModel* m = mj_loadXML(argv[2], nullptr, error, sizeof(error));
    if (m == nullptr) throw std::runtime_error(std::string("cannot load the model: ") + error);
    mjData* d = mj_makeData(m);
    Controller controller(m, contract, command, gait_frequency);
    mj_resetDataKeyframe(m, d, require(m, mjOBJ_KEY, keyframe));
    mj_forward(m, d);
    std::printf("joints: %zu, observation: %zu elements, control period %.4g s = %d x %.4g s\n", contract.joint_names.size(),
                contract.elements.size(), contract.control_period_s, contract.sim_substeps, contract.sim_period_s);
    const std::vector<std::string> perceived = perception_inputs(contract);
    if (!perceived.empty()) {
      std::printf("perception (a real cell's perception supplies these; here they are read from the simulation's state):");
      for (const std::string& key : perceived) std::printf(" %s", key.c_str());
      std::printf("\n");
    }

    // The measured velocity the tracking error compares with the command (if the policy reads it).
    int vx = -1, vy = -1, wz = -1;
    for (std::size_t i = 0; i < contract.elements.size(); ++i) {
      if (contract.elements[i] == "linvel:x") vx = static_cast<int>(i);
      if (contract.elements[i] == "linvel:y") vy = static_cast<int>(i);
      if (contract.elements[i] == "gyro:z") wz = static_cast<int>(i);
    }
    double planar = 0.0, yaw = 0.0;
    int fell_at = -1;
    std::vector<float> obs = controller.observe(d);
    for (int t = 0; t < steps; ++t) {
      torch::NoGradGuard no_grad;
      const torch::Tensor out = policy.forward({torch::from_blob(obs.data(), {static_cast<long>(obs.size())}, torch::kFloat32)}).toTensor().contiguous();
      const std::vector<float> action(out.data_ptr<float>(), out.data_ptr<float>() + out.numel());
      controller.act(action, d);
      controller.step_physics(d);
      obs = controller.observe(d);
      if (trace) {
        std::printf("step %d", t);
        print_values("obs", obs);
        print_values("action", action);
        std::printf("\n");
      }
      if (vx >= 0 && vy >= 0) planar += std::hypot(command[0] - obs[vx], command[1] - obs[vy]);
      if (wz >= 0) yaw += std::abs(command[2] - obs[wz]);
      if (fell_at < 0 && contract.sources.has("gravity") && obs[index_of(contract.elements, "gravity:z", "elements")] > 0.0) fell_at = t;
    }
    if (contract.command_names.empty()) {
      std::printf("ran %d steps; the policy reads no command, so there is no tracking error\n", steps);
    } else {
      std::printf("tracking: planar %.4f m/s, yaw %.4f rad/s over %d steps; %s\n", planar / steps, yaw / steps, steps,
                  fell_at < 0 ? "no fall" : ("fell at step " + std::to_string(fell_at)).c_str());
    }
    mj_deleteData(d);
    mj_deleteModel(m);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
