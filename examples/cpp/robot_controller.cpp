// A robot's controller loop in C++: MuJoCo's C API steps the robot, libtorch runs the exported
// policy, and everything the loop needs to know comes from the export's metadata.json: which
// sensor, site or joint each observation element reads (robot.observation_sources), the joints in
// action order, the default pose, the action scale, the PD gains and the control period.
//
//   robot_controller <policy.pt> <robot.xml> [--keyframe home] [--command vx vy wz]
//                    [--steps 500] [--gait-frequency 1.5] [--trace]
//
// Prints the contract it read, then (with --trace) one line per control step with the observation
// and the action (%.9g, so float32 values round-trip), and at the end the tracking error: the
// commanded against the measured planar velocity and yaw rate, and whether the robot fell (the
// IMU's up axis pointing down). ppo_control.deploy.controller is the same loop in Python.
#include <mujoco/mujoco.h>
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "json_lite.h"

namespace {

struct Contract {
  std::vector<std::string> joint_names;
  std::vector<double> default_pose, kp, joint_damping, actuator_damping, action_low, action_high;
  double action_scale = 0.0, sim_period_s = 0.0, control_period_s = 0.0;
  int sim_substeps = 0;
  std::vector<std::string> elements, command_names;
  std::vector<double> gait_initial_rad;
  bool gait_holds = false;  // every foot's phase is held after an advance while the command is (near) zero
  double gait_hold_rad = 0.0;
  double gait_hold_command_norm = 0.0;
  json_lite::Value sources;
};

Contract read_contract(const json_lite::Value& meta) {
  const json_lite::Value& robot = meta.at("robot");
  Contract c;
  c.joint_names = robot.at("joint_names").as_strings();
  const std::size_t n = c.joint_names.size();
  // This loop writes default_pose + action_scale * action, which an export without the field holds.
  if (robot.has("action_rule") && robot.at("action_rule").as_string() != "default_pose") {
    throw std::runtime_error("robot.action_rule is " + robot.at("action_rule").as_string() + ": this controller drives default_pose only");
  }
  c.default_pose = robot.at("default_pose").as_numbers(n);
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

int index_of(const std::vector<std::string>& names, const std::string& name, const std::string& what) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  throw std::runtime_error(what + " has no '" + name + "'");
}

int axis(const std::string& key) {
  if (key == "x") return 0;
  if (key == "y") return 1;
  if (key == "z") return 2;
  throw std::runtime_error("unknown axis '" + key + "'");
}

int require(const mjModel* m, mjtObj type, const std::string& name) {
  const int id = mj_name2id(m, type, name.c_str());
  if (id < 0) throw std::runtime_error("the model has no '" + name + "'");
  return id;
}

// The controller: gains and timing written into the model, one reader per observation element,
// and the state the policy saw in training besides the sensors (previous action, command, gait).
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
    phase_step_ = 2.0 * M_PI * c.control_period_s * gait_frequency_hz;
    if (!phase_.empty() && gait_frequency_hz <= 0.0) throw std::runtime_error("this policy reads a gait clock: give --gait-frequency");
    for (const std::string& e : c.elements) readers_.push_back(reader(e));
  }

  std::vector<float> observe(const mjData* d) {
    std::vector<float> obs;
    for (const auto& read : readers_) obs.push_back(static_cast<float>(read(d)));
    if (stepped_) {  // the controller's own state lags one control period, as in training
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

  void act(const std::vector<float>& action, mjData* d) {
    for (std::size_t i = 0; i < action.size(); ++i) {
      const double a = std::min(std::max(static_cast<double>(action[i]), c_.action_low[i]), c_.action_high[i]);
      pending_[i] = a;
      d->ctrl[i] = c_.default_pose[i] + c_.action_scale * a;
    }
    stepped_ = true;
  }

  void step_physics(mjData* d) const {
    for (int i = 0; i < c_.sim_substeps; ++i) mj_step(m_, d);
  }

 private:
  mjModel* m_;
  const Contract& c_;
  std::vector<double> command_, phase_, previous_, pending_;
  double phase_step_ = 0.0;
  bool stepped_ = false;
  std::vector<std::function<double(const mjData*)>> readers_;

  std::function<double(const mjData*)> reader(const std::string& element) {
    const std::size_t colon = element.find(':');
    const std::string quantity = element.substr(0, colon), key = element.substr(colon + 1);
    if (!c_.sources.has(quantity)) throw std::runtime_error("robot.observation_sources does not say where " + quantity + " is read");
    const json_lite::Value& source = c_.sources.at(quantity);
    if (source.has("sensor")) {
      const int adr = m_->sensor_adr[require(m_, mjOBJ_SENSOR, source.at("sensor").as_string())] + axis(key);
      return [adr](const mjData* d) { return d->sensordata[adr]; };
    }
    if (source.has("site_gravity")) {
      const int site = require(m_, mjOBJ_SITE, source.at("site_gravity").as_string()), k = axis(key);
      return [site, k](const mjData* d) { return -d->site_xmat[9 * site + 6 + k]; };
    }
    if (source.has("joint")) {
      const int joint = require(m_, mjOBJ_JOINT, key);
      const std::string how = source.at("joint").as_string();
      if (how == "qvel") {
        const int dof = m_->jnt_dofadr[joint];
        return [dof](const mjData* d) { return d->qvel[dof]; };
      }
      const int adr = m_->jnt_qposadr[joint];
      const double offset = how == "qpos - default_pose" ? c_.default_pose[index_of(c_.joint_names, key, "joint_names")] : 0.0;
      return [adr, offset](const mjData* d) { return d->qpos[adr] - offset; };
    }
    const std::string what = source.at("controller").as_string();
    if (what == "previous_action") {
      const int i = index_of(c_.joint_names, key, "joint_names");
      return [this, i](const mjData*) { return previous_[i]; };
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
    throw std::runtime_error("unknown observation source for " + quantity);
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
    policy.get_method("reset")({});  // a new episode: a policy with history or memory forgets it
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
    std::printf("tracking: planar %.4f m/s, yaw %.4f rad/s over %d steps; %s\n", planar / steps, yaw / steps, steps,
                fell_at < 0 ? "no fall" : ("fell at step " + std::to_string(fell_at)).c_str());
    mj_deleteData(d);
    mj_deleteModel(m);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
