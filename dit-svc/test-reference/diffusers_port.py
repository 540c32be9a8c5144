#!/usr/bin/env python3
# Derived from diffusers (https://github.com/huggingface/diffusers), Apache License 2.0,
# Copyright The HuggingFace Team and the authors named in its scheduler files: the code paths of
# src/diffusers/schedulers/scheduling_{ddim,pndm,euler_discrete,euler_ancestral_discrete,
# dpmsolver_multistep,lcm,flow_match_euler_discrete}.py and the pipeline functions listed below,
# as of the 2025 releases (0.3x). Modified by the diffmesh authors: ported to numpy (torch float32
# emulated), cut to what the tests compare, and wrapped in the case list that writes expected.json.
# It is a test tool: it does not ship with the services (see NOTICE).
"""
Reference values for the scheduler tests: a line-by-line numpy port of the diffusers
scheduler code paths (src/diffusers/schedulers/scheduling_*.py, 2025 versions) and of the
pipeline glue they need (StableDiffusionImg2ImgPipeline.get_timesteps, FluxPipeline
calculate_shift and sigmas, SD3/Flux img2img get_timesteps).

torch is not available here, so torch float32 tensors are np.float32 arrays/scalars: every
operation rounds to float32 as torch's does. Two torch details are emulated explicitly:
- torch.cumprod on the CPU accumulates in float64 and stores float32;
- torch.linspace(dtype=float32) uses step = (end - start)/(steps - 1) in float32, the first half
  counted from start, the second from end (its scalar kernel).
numpy code of diffusers runs as numpy here (np.linspace, np.arange, np.interp, np.round, ...),
under numpy 2 promotion rules.

Run: python3 diffusers_port.py > expected.json   (numpy 2; writes the cases the tests read)
"""
import json
import math
import sys

import numpy as np

F32 = np.float32


# ---------------------------------------------------------------- torch stand-ins

def torch_linspace_f32(start, end, steps):
    start = F32(start)
    end = F32(end)
    if steps == 1:
        return np.array([start], dtype=F32)
    step = F32(F32(end - start) / F32(steps - 1))
    halfway = steps // 2
    out = np.empty(steps, dtype=F32)
    for i in range(steps):
        if i < halfway:
            out[i] = F32(start + F32(step * F32(i)))
        else:
            out[i] = F32(end - F32(step * F32(steps - i - 1)))
    return out


def torch_cumprod_f32(x):
    return np.cumprod(x.astype(np.float64)).astype(F32)


# torch.log / torch.exp of a 0-dim float32 tensor run the scalar kernel (std::log, std::exp:
# correctly rounded in practice), unlike numpy's SIMD float32 log/exp, which are not.
def tlog(x):
    x = float(x)
    return F32(-np.inf) if x == 0 else F32(math.log(x))


def texp(x):
    return F32(math.exp(float(x)))


def betas_for_alpha_bar(num_diffusion_timesteps, max_beta=0.999):
    def alpha_bar_fn(t):
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

    betas = []
    for i in range(num_diffusion_timesteps):
        t1 = i / num_diffusion_timesteps
        t2 = (i + 1) / num_diffusion_timesteps
        betas.append(min(1 - alpha_bar_fn(t2) / alpha_bar_fn(t1), max_beta))
    return np.array(betas, dtype=F32)


def rescale_zero_terminal_snr(betas):
    alphas = F32(1.0) - betas
    alphas_cumprod = torch_cumprod_f32(alphas)
    alphas_bar_sqrt = np.sqrt(alphas_cumprod)
    a0 = alphas_bar_sqrt[0].copy()
    aT = alphas_bar_sqrt[-1].copy()
    alphas_bar_sqrt = alphas_bar_sqrt - aT
    alphas_bar_sqrt = alphas_bar_sqrt * (a0 / (a0 - aT))
    alphas_bar = alphas_bar_sqrt * alphas_bar_sqrt
    alphas = alphas_bar[1:] / alphas_bar[:-1]
    alphas = np.concatenate([alphas_bar[0:1], alphas])
    return F32(1) - alphas


def make_betas(cfg):
    n = cfg.get("num_train_timesteps", 1000)
    if cfg.get("trained_betas") is not None:
        betas = np.array(cfg["trained_betas"], dtype=F32)
    elif cfg["beta_schedule"] == "linear":
        betas = torch_linspace_f32(cfg["beta_start"], cfg["beta_end"], n)
    elif cfg["beta_schedule"] == "scaled_linear":
        b = torch_linspace_f32(cfg["beta_start"] ** 0.5, cfg["beta_end"] ** 0.5, n)
        betas = b * b
    else:
        betas = betas_for_alpha_bar(n)
    if cfg.get("rescale_betas_zero_snr", False):
        betas = rescale_zero_terminal_snr(betas)
    return betas


def ddpm_add_noise(alphas_cumprod, original, noise, t):
    sqrt_alpha_prod = np.sqrt(alphas_cumprod[t])
    sqrt_one_minus = np.sqrt(F32(1) - alphas_cumprod[t])
    return sqrt_alpha_prod * original + sqrt_one_minus * noise


def threshold_sample(sample, ratio, max_value, batch=1):
    s2 = sample.reshape(batch, -1)
    abs_sample = np.abs(s2)
    out = np.empty_like(s2)
    for b in range(batch):
        srt = np.sort(abs_sample[b])
        ranks = F32(F32(ratio) * F32(srt.size - 1))
        below = int(ranks)
        above = int(np.ceil(ranks))
        w = F32(ranks - F32(below))
        lo, hi = srt[below], srt[above]
        q = F32(lo + w * (hi - lo)) if w < 0.5 else F32(hi - (hi - lo) * (F32(1) - w))
        s = F32(min(max(q, F32(1)), F32(max_value)))
        out[b] = np.clip(s2[b], -s, s) / s
    return out.reshape(sample.shape)


def clip_or_threshold(x0, cfg, clip_default):
    if cfg.get("thresholding", False):
        return threshold_sample(x0, cfg.get("dynamic_thresholding_ratio", 0.995), cfg.get("sample_max_value", 1.0))
    if cfg.get("clip_sample", clip_default):
        r = F32(cfg.get("clip_sample_range", 1.0))
        return np.clip(x0, -r, r)
    return x0


def img2img_t_start(n, strength):  # StableDiffusionImg2ImgPipeline.get_timesteps
    init_timestep = min(int(n * strength), n)
    return max(n - init_timestep, 0)


def flow_img2img_t_start(n, strength):  # SD3 / Flux img2img get_timesteps
    init_timestep = min(n * strength, n)
    return int(max(n - init_timestep, 0))


# ---------------------------------------------------------------- DDIM

class DDIM:
    def __init__(self, cfg, n, eta=0.0):
        self.cfg = cfg
        N = cfg.get("num_train_timesteps", 1000)
        self.alphas_cumprod = torch_cumprod_f32(F32(1) - make_betas(cfg))
        self.final_alpha_cumprod = F32(1.0) if cfg.get("set_alpha_to_one", True) else self.alphas_cumprod[0]
        self.n = n
        self.eta = eta
        spacing = cfg.get("timestep_spacing", "leading")
        if spacing == "linspace":
            ts = np.linspace(0, N - 1, n).round()[::-1].copy().astype(np.int64)
        elif spacing == "leading":
            step_ratio = N // n
            ts = (np.arange(0, n) * step_ratio).round()[::-1].copy().astype(np.int64)
            ts += cfg.get("steps_offset", 0)
        else:
            step_ratio = N / n
            ts = np.round(np.arange(N, 0, -step_ratio)).astype(np.int64)
            ts -= 1
        self.timesteps = ts
        self.init_noise_sigma = 1.0

    def scale_model_input(self, x, i):
        return x

    def step(self, model_output, i, sample, noise_fn):
        cfg = self.cfg
        timestep = int(self.timesteps[i])
        prev_timestep = timestep - cfg.get("num_train_timesteps", 1000) // self.n
        alpha_prod_t = self.alphas_cumprod[timestep]
        alpha_prod_t_prev = self.alphas_cumprod[prev_timestep] if prev_timestep >= 0 else self.final_alpha_cumprod
        beta_prod_t = F32(1) - alpha_prod_t
        pt = cfg.get("prediction_type", "epsilon")
        if pt == "epsilon":
            pred_original_sample = (sample - np.sqrt(beta_prod_t) * model_output) / np.sqrt(alpha_prod_t)
            pred_epsilon = model_output
        elif pt == "sample":
            pred_original_sample = model_output
            pred_epsilon = (sample - np.sqrt(alpha_prod_t) * pred_original_sample) / np.sqrt(beta_prod_t)
        else:
            pred_original_sample = np.sqrt(alpha_prod_t) * sample - np.sqrt(beta_prod_t) * model_output
            pred_epsilon = np.sqrt(alpha_prod_t) * model_output + np.sqrt(beta_prod_t) * sample
        pred_original_sample = clip_or_threshold(pred_original_sample, cfg, True)
        beta_prod_t_prev = F32(1) - alpha_prod_t_prev
        variance = (beta_prod_t_prev / beta_prod_t) * (F32(1) - alpha_prod_t / alpha_prod_t_prev)
        std_dev_t = F32(self.eta) * np.sqrt(variance)
        pred_sample_direction = np.sqrt(F32(1) - alpha_prod_t_prev - std_dev_t * std_dev_t) * pred_epsilon
        prev_sample = np.sqrt(alpha_prod_t_prev) * pred_original_sample + pred_sample_direction
        if self.eta > 0:
            prev_sample = prev_sample + std_dev_t * noise_fn(sample.size)
        return prev_sample

    def add_noise(self, original, noise, i):
        return ddpm_add_noise(self.alphas_cumprod, original, noise, int(self.timesteps[i]))

    def slice(self, start):
        self.timesteps = self.timesteps[start:]


# ---------------------------------------------------------------- PNDM

class PNDM:
    def __init__(self, cfg, n):
        self.cfg = cfg
        N = cfg.get("num_train_timesteps", 1000)
        self.N = N
        self.alphas_cumprod = torch_cumprod_f32(F32(1) - make_betas(cfg))
        self.final_alpha_cumprod = F32(1.0) if cfg.get("set_alpha_to_one", False) else self.alphas_cumprod[0]
        self.pndm_order = 4
        self.cur_model_output = 0
        self.counter = 0
        self.cur_sample = None
        self.ets = []
        self.num_inference_steps = n
        spacing = cfg.get("timestep_spacing", "leading")
        if spacing == "linspace":
            _t = np.linspace(0, N - 1, n).round().astype(np.int64)
        elif spacing == "leading":
            step_ratio = N // n
            _t = (np.arange(0, n) * step_ratio).round()
            _t += cfg.get("steps_offset", 0)
        else:
            step_ratio = N / n
            _t = np.round(np.arange(N, 0, -step_ratio))[::-1].astype(np.int64)
            _t -= 1
        if cfg.get("skip_prk_steps", False):
            self.prk_timesteps = np.array([])
            self.plms_timesteps = np.concatenate([_t[:-1], _t[-2:-1], _t[-1:]])[::-1].copy()
        else:
            prk = np.array(_t[-self.pndm_order:]).repeat(2) + np.tile(np.array([0, N // n // 2]), self.pndm_order)
            self.prk_timesteps = (prk[:-1].repeat(2)[1:-1])[::-1].copy()
            self.plms_timesteps = _t[:-3][::-1].copy()
        self.timesteps = np.concatenate([self.prk_timesteps, self.plms_timesteps]).astype(np.int64)
        self.init_noise_sigma = 1.0

    def scale_model_input(self, x, i):
        return x

    def step(self, model_output, i, sample, noise_fn):
        timestep = int(self.timesteps[i])
        if self.counter < len(self.prk_timesteps) and not self.cfg.get("skip_prk_steps", False):
            return self.step_prk(model_output, timestep, sample)
        return self.step_plms(model_output, timestep, sample)

    def step_prk(self, model_output, timestep, sample):
        diff_to_prev = 0 if self.counter % 2 else self.N // self.num_inference_steps // 2
        prev_timestep = timestep - diff_to_prev
        timestep = int(self.prk_timesteps[self.counter // 4 * 4])
        if self.counter % 4 == 0:
            self.cur_model_output = self.cur_model_output + F32(1 / 6) * model_output
            self.ets.append(model_output)
            self.cur_sample = sample
        elif (self.counter - 1) % 4 == 0:
            self.cur_model_output = self.cur_model_output + F32(1 / 3) * model_output
        elif (self.counter - 2) % 4 == 0:
            self.cur_model_output = self.cur_model_output + F32(1 / 3) * model_output
        elif (self.counter - 3) % 4 == 0:
            model_output = self.cur_model_output + F32(1 / 6) * model_output
            self.cur_model_output = 0
        cur_sample = self.cur_sample if self.cur_sample is not None else sample
        prev_sample = self._get_prev_sample(cur_sample, timestep, prev_timestep, model_output)
        self.counter += 1
        return prev_sample

    def step_plms(self, model_output, timestep, sample):
        prev_timestep = timestep - self.N // self.num_inference_steps
        if self.counter != 1:
            self.ets = self.ets[-3:]
            self.ets.append(model_output)
        else:
            prev_timestep = timestep
            timestep = timestep + self.N // self.num_inference_steps
        if len(self.ets) == 1 and self.counter == 0:
            self.cur_sample = sample
        elif len(self.ets) == 1 and self.counter == 1:
            model_output = (model_output + self.ets[-1]) / F32(2)
            sample = self.cur_sample
            self.cur_sample = None
        elif len(self.ets) == 2:
            model_output = (F32(3) * self.ets[-1] - self.ets[-2]) / F32(2)
        elif len(self.ets) == 3:
            model_output = (F32(23) * self.ets[-1] - F32(16) * self.ets[-2] + F32(5) * self.ets[-3]) / F32(12)
        else:
            model_output = F32(1 / 24) * (
                F32(55) * self.ets[-1] - F32(59) * self.ets[-2] + F32(37) * self.ets[-3] - F32(9) * self.ets[-4]
            )
        prev_sample = self._get_prev_sample(sample, timestep, prev_timestep, model_output)
        self.counter += 1
        return prev_sample

    def _get_prev_sample(self, sample, timestep, prev_timestep, model_output):
        alpha_prod_t = self.alphas_cumprod[timestep]
        alpha_prod_t_prev = self.alphas_cumprod[prev_timestep] if prev_timestep >= 0 else self.final_alpha_cumprod
        beta_prod_t = F32(1) - alpha_prod_t
        beta_prod_t_prev = F32(1) - alpha_prod_t_prev
        if self.cfg.get("prediction_type", "epsilon") == "v_prediction":
            model_output = np.sqrt(alpha_prod_t) * model_output + np.sqrt(beta_prod_t) * sample
        sample_coeff = np.sqrt(alpha_prod_t_prev / alpha_prod_t)
        model_output_denom_coeff = alpha_prod_t * np.sqrt(beta_prod_t_prev) + np.sqrt(
            alpha_prod_t * beta_prod_t * alpha_prod_t_prev
        )
        return sample_coeff * sample - (alpha_prod_t_prev - alpha_prod_t) * model_output / model_output_denom_coeff

    def add_noise(self, original, noise, i):
        return ddpm_add_noise(self.alphas_cumprod, original, noise, int(self.timesteps[i]))

    def slice(self, start):
        self.timesteps = self.timesteps[start:]


# ---------------------------------------------------------------- Euler / Euler ancestral

def _sigma_to_t(sigma, log_sigmas):
    log_sigma = np.log(np.maximum(sigma, 1e-10))
    dists = log_sigma - log_sigmas[:, np.newaxis]
    low_idx = np.cumsum((dists >= 0), axis=0).argmax(axis=0).clip(max=log_sigmas.shape[0] - 2)
    high_idx = low_idx + 1
    low = log_sigmas[low_idx]
    high = log_sigmas[high_idx]
    w = (low - log_sigma) / (low - high)
    w = np.clip(w, 0, 1)
    t = (1 - w) * low_idx + w * high_idx
    t = t.reshape(sigma.shape)
    return t


def _convert_to_karras(in_sigmas, num_inference_steps, sigma_min=None, sigma_max=None):
    sigma_min = sigma_min if sigma_min is not None else in_sigmas[-1].item()
    sigma_max = sigma_max if sigma_max is not None else in_sigmas[0].item()
    rho = 7.0
    ramp = np.linspace(0, 1, num_inference_steps)
    min_inv_rho = sigma_min ** (1 / rho)
    max_inv_rho = sigma_max ** (1 / rho)
    return (max_inv_rho + ramp * (min_inv_rho - max_inv_rho)) ** rho


class Euler:
    ancestral = False

    def __init__(self, cfg, n):
        self.cfg = cfg
        N = cfg.get("num_train_timesteps", 1000)
        self.alphas_cumprod = torch_cumprod_f32(F32(1) - make_betas(cfg))
        if cfg.get("rescale_betas_zero_snr", False):
            self.alphas_cumprod[-1] = F32(2 ** -24)
        spacing = cfg.get("timestep_spacing", "linspace")
        if spacing == "linspace":
            timesteps = np.linspace(0, N - 1, n, dtype=np.float32)[::-1].copy()
        elif spacing == "leading":
            step_ratio = N // n
            timesteps = (np.arange(0, n) * step_ratio).round()[::-1].copy().astype(np.float32)
            timesteps += cfg.get("steps_offset", 0)
        else:
            step_ratio = N / n
            timesteps = (np.arange(N, 0, -step_ratio)).round().copy().astype(np.float32)
            timesteps -= 1
        sigmas = np.sqrt((F32(1) - self.alphas_cumprod) / self.alphas_cumprod)
        log_sigmas = np.log(sigmas)
        sigmas = np.interp(timesteps, np.arange(0, len(sigmas)), sigmas)
        if not self.ancestral and cfg.get("use_karras_sigmas", False):
            sigmas = _convert_to_karras(sigmas, n, cfg.get("sigma_min"), cfg.get("sigma_max"))
            timesteps = np.array([_sigma_to_t(sigma, log_sigmas) for sigma in sigmas])
        if not self.ancestral and cfg.get("final_sigmas_type", "zero") == "sigma_min":
            sigma_last = np.sqrt((F32(1) - self.alphas_cumprod[0]) / self.alphas_cumprod[0])
        else:
            sigma_last = 0
        self.sigmas = np.concatenate([sigmas, [sigma_last]]).astype(np.float32)
        if (
            not self.ancestral
            and cfg.get("timestep_type", "discrete") == "continuous"
            and cfg.get("prediction_type", "epsilon") == "v_prediction"
        ):
            self.timesteps = np.array([F32(0.25) * tlog(s) for s in self.sigmas[:-1]], dtype=F32)
        else:
            self.timesteps = timesteps.astype(np.float32)
        max_sigma = self.sigmas.max()
        if spacing in ["linspace", "trailing"]:
            self.init_noise_sigma = max_sigma
        else:
            self.init_noise_sigma = np.sqrt(max_sigma * max_sigma + F32(1))
        self.begin_index = 0
        self.step_index = 0

    def scale_model_input(self, sample, i):
        sigma = self.sigmas[self.begin_index + i]
        return sample / np.sqrt(sigma * sigma + F32(1))

    def pred_x0(self, model_output, sample, sigma):
        pt = self.cfg.get("prediction_type", "epsilon")
        if pt in ("sample", "original_sample"):
            return model_output
        if pt == "epsilon":
            return sample - sigma * model_output
        return model_output * (-sigma / np.sqrt(sigma * sigma + F32(1))) + (sample / (sigma * sigma + F32(1)))

    def step(self, model_output, i, sample, noise_fn):
        si = self.begin_index + i
        sigma = self.sigmas[si]
        sigma_hat = sigma
        pred_original_sample = self.pred_x0(model_output, sample, sigma)
        derivative = (sample - pred_original_sample) / sigma_hat
        dt = self.sigmas[si + 1] - sigma_hat
        return sample + derivative * dt

    def add_noise(self, original, noise, i):
        sigma = self.sigmas[self.begin_index + i]
        return original + noise * sigma

    def slice(self, start):
        self.timesteps = self.timesteps[start:]
        self.begin_index = start


class EulerAncestral(Euler):
    ancestral = True

    def step(self, model_output, i, sample, noise_fn):
        si = self.begin_index + i
        sigma = self.sigmas[si]
        pred_original_sample = self.pred_x0(model_output, sample, sigma)
        sigma_from = self.sigmas[si]
        sigma_to = self.sigmas[si + 1]
        sigma_up = np.sqrt(sigma_to * sigma_to * (sigma_from * sigma_from - sigma_to * sigma_to) / (sigma_from * sigma_from))
        sigma_down = np.sqrt(sigma_to * sigma_to - sigma_up * sigma_up)
        derivative = (sample - pred_original_sample) / sigma
        dt = sigma_down - sigma
        prev_sample = sample + derivative * dt
        noise = noise_fn(sample.size)
        return prev_sample + noise * sigma_up


# ---------------------------------------------------------------- DPM-Solver++ multistep

class DPM:
    def __init__(self, cfg, n):
        self.cfg = cfg
        N = cfg.get("num_train_timesteps", 1000)
        self.alphas_cumprod = torch_cumprod_f32(F32(1) - make_betas(cfg))
        if cfg.get("rescale_betas_zero_snr", False):
            self.alphas_cumprod[-1] = F32(2 ** -24)
        self.alpha_t = np.sqrt(self.alphas_cumprod)
        self.sigma_t = np.sqrt(F32(1) - self.alphas_cumprod)
        self.lambda_t = np.array([tlog(a) - tlog(s) for a, s in zip(self.alpha_t, self.sigma_t)], dtype=F32)
        self.order = cfg.get("solver_order", 2)
        lmc = F32(cfg.get("lambda_min_clipped", -float("inf")))
        clipped_idx = int(np.searchsorted(self.lambda_t[::-1], lmc, side="left"))
        last_timestep = N - clipped_idx
        spacing = cfg.get("timestep_spacing", "linspace")
        if spacing == "linspace":
            timesteps = np.linspace(0, last_timestep - 1, n + 1).round()[::-1][:-1].copy().astype(np.int64)
        elif spacing == "leading":
            step_ratio = last_timestep // (n + 1)
            timesteps = (np.arange(0, n + 1) * step_ratio).round()[::-1][:-1].copy().astype(np.int64)
            timesteps += cfg.get("steps_offset", 0)
        else:
            step_ratio = N / n
            timesteps = np.arange(last_timestep, 0, -step_ratio).round().copy().astype(np.int64)
            timesteps -= 1
        sigmas = np.sqrt((F32(1) - self.alphas_cumprod) / self.alphas_cumprod)
        log_sigmas = np.log(sigmas)
        if cfg.get("use_karras_sigmas", False):
            sigmas = np.flip(sigmas).copy()
            sigmas = _convert_to_karras(sigmas, n)
            timesteps = np.array([_sigma_to_t(sigma, log_sigmas) for sigma in sigmas])
            if cfg.get("beta_schedule") != "squaredcos_cap_v2":
                timesteps = timesteps.round()
        else:
            sigmas = np.interp(timesteps, np.arange(0, len(sigmas)), sigmas)
        if cfg.get("final_sigmas_type", "zero") == "sigma_min":
            sigma_last = np.sqrt((F32(1) - self.alphas_cumprod[0]) / self.alphas_cumprod[0])
        else:
            sigma_last = 0
        self.sigmas = np.concatenate([sigmas, [sigma_last]]).astype(np.float32)
        self.timesteps = timesteps.astype(np.int64)  # torch .to(int64) truncates
        self.full_len = len(self.timesteps)
        self.model_outputs = [None] * self.order
        self.lower_order_nums = 0
        self.begin_index = 0
        self.init_noise_sigma = 1.0

    @staticmethod
    def _sigma_to_alpha_sigma_t(sigma):
        alpha_t = F32(1) / np.sqrt(sigma * sigma + F32(1))
        return alpha_t, sigma * alpha_t

    def scale_model_input(self, x, i):
        return x

    def convert_model_output(self, model_output, sample, si):
        pt = self.cfg.get("prediction_type", "epsilon")
        sigma = self.sigmas[si]
        alpha_t, sigma_t = self._sigma_to_alpha_sigma_t(sigma)
        if pt == "epsilon":
            x0_pred = (sample - sigma_t * model_output) / alpha_t
        elif pt == "sample":
            x0_pred = model_output
        else:
            x0_pred = alpha_t * sample - sigma_t * model_output
        if self.cfg.get("thresholding", False):
            x0_pred = threshold_sample(
                x0_pred, self.cfg.get("dynamic_thresholding_ratio", 0.995), self.cfg.get("sample_max_value", 1.0)
            )
        return x0_pred

    def first_order(self, model_output, si, sample):
        alpha_t, sigma_t = self._sigma_to_alpha_sigma_t(self.sigmas[si + 1])
        alpha_s, sigma_s = self._sigma_to_alpha_sigma_t(self.sigmas[si])
        lambda_t = tlog(alpha_t) - tlog(sigma_t)
        lambda_s = tlog(alpha_s) - tlog(sigma_s)
        h = lambda_t - lambda_s
        return (sigma_t / sigma_s) * sample - (alpha_t * (texp(-h) - F32(1))) * model_output

    def second_order(self, si, sample):
        sigma_t, sigma_s0, sigma_s1 = self.sigmas[si + 1], self.sigmas[si], self.sigmas[si - 1]
        alpha_t, sigma_t = self._sigma_to_alpha_sigma_t(sigma_t)
        alpha_s0, sigma_s0 = self._sigma_to_alpha_sigma_t(sigma_s0)
        alpha_s1, sigma_s1 = self._sigma_to_alpha_sigma_t(sigma_s1)
        lambda_t = tlog(alpha_t) - tlog(sigma_t)
        lambda_s0 = tlog(alpha_s0) - tlog(sigma_s0)
        lambda_s1 = tlog(alpha_s1) - tlog(sigma_s1)
        m0, m1 = self.model_outputs[-1], self.model_outputs[-2]
        h, h_0 = lambda_t - lambda_s0, lambda_s0 - lambda_s1
        r0 = h_0 / h
        D0, D1 = m0, (F32(1) / r0) * (m0 - m1)
        if self.cfg.get("solver_type", "midpoint") == "heun":
            return (
                (sigma_t / sigma_s0) * sample
                - (alpha_t * (texp(-h) - F32(1))) * D0
                + (alpha_t * ((texp(-h) - F32(1)) / h + F32(1))) * D1
            )
        return (
            (sigma_t / sigma_s0) * sample
            - (alpha_t * (texp(-h) - F32(1))) * D0
            - (F32(0.5) * (alpha_t * (texp(-h) - F32(1)))) * D1
        )

    def step(self, model_output, i, sample, noise_fn):
        si = self.begin_index + i
        cfg = self.cfg
        lower_order_final = (si == self.full_len - 1) and (
            cfg.get("euler_at_final", False)
            or (cfg.get("lower_order_final", True) and self.full_len < 15)
            or cfg.get("final_sigmas_type", "zero") == "zero"
        )
        model_output = self.convert_model_output(model_output, sample, si)
        for k in range(self.order - 1):
            self.model_outputs[k] = self.model_outputs[k + 1]
        self.model_outputs[-1] = model_output
        if self.order == 1 or self.lower_order_nums < 1 or lower_order_final:
            prev_sample = self.first_order(model_output, si, sample)
        else:
            prev_sample = self.second_order(si, sample)
        if self.lower_order_nums < self.order:
            self.lower_order_nums += 1
        return prev_sample

    def add_noise(self, original, noise, i):
        alpha_t, sigma_t = self._sigma_to_alpha_sigma_t(self.sigmas[self.begin_index + i])
        return alpha_t * original + sigma_t * noise

    def slice(self, start):
        self.timesteps = self.timesteps[start:]
        self.begin_index = start


# ---------------------------------------------------------------- LCM

class LCM:
    def __init__(self, cfg, n, strength=1.0):
        self.cfg = cfg
        N = cfg.get("num_train_timesteps", 1000)
        self.alphas_cumprod = torch_cumprod_f32(F32(1) - make_betas(cfg))
        self.final_alpha_cumprod = F32(1.0) if cfg.get("set_alpha_to_one", True) else self.alphas_cumprod[0]
        original_steps = cfg.get("original_inference_steps", 50)
        k = N // original_steps
        lcm_origin_timesteps = np.asarray(list(range(1, int(original_steps * strength) + 1))) * k - 1
        lcm_origin_timesteps = lcm_origin_timesteps[::-1].copy()
        inference_indices = np.linspace(0, len(lcm_origin_timesteps), num=n, endpoint=False)
        inference_indices = np.floor(inference_indices).astype(np.int64)
        self.timesteps = lcm_origin_timesteps[inference_indices]
        self.num_inference_steps = n
        self.init_noise_sigma = 1.0

    def scale_model_input(self, x, i):
        return x

    def scalings(self, timestep):
        scaled_timestep = F32(timestep) * F32(self.cfg.get("timestep_scaling", 10.0))
        d = scaled_timestep * scaled_timestep + F32(0.25)
        c_skip = (F32(1) / d) * F32(0.25)
        c_out = scaled_timestep / np.sqrt(d)
        return c_skip, c_out

    def step(self, model_output, i, sample, noise_fn):
        timestep = int(self.timesteps[i])
        prev_timestep = int(self.timesteps[i + 1]) if i + 1 < len(self.timesteps) else timestep
        alpha_prod_t = self.alphas_cumprod[timestep]
        alpha_prod_t_prev = self.alphas_cumprod[prev_timestep] if prev_timestep >= 0 else self.final_alpha_cumprod
        beta_prod_t = F32(1) - alpha_prod_t
        beta_prod_t_prev = F32(1) - alpha_prod_t_prev
        c_skip, c_out = self.scalings(timestep)
        pt = self.cfg.get("prediction_type", "epsilon")
        if pt == "epsilon":
            x0 = (sample - np.sqrt(beta_prod_t) * model_output) / np.sqrt(alpha_prod_t)
        elif pt == "sample":
            x0 = model_output
        else:
            x0 = np.sqrt(alpha_prod_t) * sample - np.sqrt(beta_prod_t) * model_output
        x0 = clip_or_threshold(x0, self.cfg, False)
        denoised = c_out * x0 + c_skip * sample
        if i != self.num_inference_steps - 1:
            noise = noise_fn(sample.size)
            return np.sqrt(alpha_prod_t_prev) * denoised + np.sqrt(beta_prod_t_prev) * noise
        return denoised

    def add_noise(self, original, noise, i):
        return ddpm_add_noise(self.alphas_cumprod, original, noise, int(self.timesteps[i]))

    def slice(self, start):
        pass


# ---------------------------------------------------------------- Flow matching

def calculate_shift(image_seq_len, base_seq_len=256, max_seq_len=4096, base_shift=0.5, max_shift=1.15):
    m = (max_shift - base_shift) / (max_seq_len - base_seq_len)
    b = base_shift - m * base_seq_len
    return image_seq_len * m + b


class FlowMatch:
    def __init__(self, cfg, n, sigmas=None, mu=None):
        self.cfg = cfg
        N = cfg.get("num_train_timesteps", 1000)
        shift = cfg.get("shift", 1.0)
        dynamic = cfg.get("use_dynamic_shifting", False)
        timesteps = np.linspace(1, N, N, dtype=np.float32)[::-1].copy()
        s0 = timesteps / F32(N)
        if not dynamic:
            s0 = F32(shift) * s0 / (F32(1) + F32(shift - 1) * s0)
        sigma_min = s0[-1].item()
        sigma_max = s0[0].item()
        if sigmas is None:
            timesteps = np.linspace(sigma_max * N, sigma_min * N, n)
            sigmas = timesteps / N
        else:
            sigmas = np.array(sigmas).astype(np.float32)
        if dynamic:
            if cfg.get("time_shift_type", "exponential") == "exponential":
                sigmas = math.exp(mu) / (math.exp(mu) + (1 / sigmas - 1) ** 1.0)
            else:
                sigmas = mu / (mu + (1 / sigmas - 1) ** 1.0)
        else:
            sigmas = shift * sigmas / (1 + (shift - 1) * sigmas)
        if cfg.get("shift_terminal"):
            one_minus_z = 1 - sigmas
            scale_factor = one_minus_z[-1] / (1 - cfg["shift_terminal"])
            sigmas = 1 - (one_minus_z / scale_factor)
        sigmas = sigmas.astype(np.float32)
        self.timesteps = sigmas * F32(N)
        self.sigmas = np.concatenate([sigmas, np.zeros(1, dtype=F32)])
        self.begin_index = 0
        self.init_noise_sigma = 1.0

    def scale_model_input(self, x, i):
        return x

    def step(self, model_output, i, sample, noise_fn):
        si = self.begin_index + i
        dt = self.sigmas[si + 1] - self.sigmas[si]
        return sample + dt * model_output

    def add_noise(self, original, noise, i):  # scale_noise
        sigma = self.sigmas[self.begin_index + i]
        return sigma * noise + (F32(1.0) - sigma) * original

    def slice(self, start):
        self.timesteps = self.timesteps[start:]
        self.begin_index = start


# ---------------------------------------------------------------- deterministic test inputs

def pattern(seed, step, n):
    """Deterministic values in [-1, 1] (float32), the same formula as the TypeScript tests."""
    return np.array([F32(((k * 7919 + step * 104729 + seed * 31) % 2001) / 1000 - 1) for k in range(n)], dtype=F32)


SIZE = 8
MODEL_A = F32(0.25)


def model(x, step):
    # a deterministic stand-in for a denoiser: 0.25·x + c
    return MODEL_A * x + pattern(7, 0, SIZE)


class Noise:
    def __init__(self):
        self.draws = 0

    def __call__(self, n):
        z = pattern(3, 1000 + self.draws, n)
        self.draws += 1
        return z


def build(cls_name, cfg, n, opts):
    strength = opts.get("strength", 1.0)
    if cls_name == "DDIMScheduler":
        s = DDIM(cfg, n, opts.get("eta", 0.0))
    elif cls_name == "PNDMScheduler":
        s = PNDM(cfg, n)
    elif cls_name == "EulerDiscreteScheduler":
        s = Euler(cfg, n)
    elif cls_name == "EulerAncestralDiscreteScheduler":
        s = EulerAncestral(cfg, n)
    elif cls_name == "DPMSolverMultistepScheduler":
        s = DPM(cfg, n)
    elif cls_name == "LCMScheduler":
        return LCM(cfg, n, strength), 0
    else:
        mu = opts.get("mu")
        if mu is None and opts.get("imageSeqLen") is not None:
            mu = calculate_shift(
                opts["imageSeqLen"],
                cfg.get("base_image_seq_len", 256),
                cfg.get("max_image_seq_len", 4096),
                cfg.get("base_shift", 0.5),
                cfg.get("max_shift", 1.15),
            )
        sig = None
        if opts.get("fluxSigmas"):
            sig = np.linspace(1.0, 1 / n, n)
        s = FlowMatch(cfg, n, sig, mu)
        start = flow_img2img_t_start(n, strength) if strength < 1 else 0
        s.slice(start)
        return s, start
    start = img2img_t_start(n, strength) if strength < 1 else 0
    s.slice(start)
    return s, start


def run_case(name, cfg, n, opts):
    cls_name = cfg["_class_name"]
    s, start = build(cls_name, cfg, n, opts)
    noise_fn = Noise()
    init_noise = pattern(1, 0, SIZE)
    if opts.get("strength", 1.0) < 1:
        x = s.add_noise(pattern(2, 0, SIZE), init_noise, 0).astype(F32)
    else:
        x = (init_noise * F32(s.init_noise_sigma)).astype(F32)
    traj = [x.tolist()]
    for i in range(len(s.timesteps)):
        xin = s.scale_model_input(x, i)
        mo = model(xin, i).astype(F32)
        x = s.step(mo, i, x, noise_fn).astype(F32)
        traj.append(x.tolist())
    out = {
        "name": name,
        "config": cfg,
        "steps": n,
        "options": {k: v for k, v in opts.items() if k != "fluxSigmas"},
        "fluxSigmas": bool(opts.get("fluxSigmas")),
        "timesteps": [float(t) for t in s.timesteps],
        "initNoiseSigma": float(s.init_noise_sigma),
        "trajectory": traj,
    }
    if hasattr(s, "sigmas"):
        out["sigmas"] = [float(v) for v in s.sigmas]
    return out


SD15 = {
    "_class_name": "PNDMScheduler",
    "_diffusers_version": "0.6.0",
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "num_train_timesteps": 1000,
    "set_alpha_to_one": False,
    "skip_prk_steps": True,
    "steps_offset": 1,
    "trained_betas": None,
    "clip_sample": False,
}
SDXL_EULER = {
    "_class_name": "EulerDiscreteScheduler",
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "interpolation_type": "linear",
    "num_train_timesteps": 1000,
    "prediction_type": "epsilon",
    "steps_offset": 1,
    "timestep_spacing": "leading",
    "trained_betas": None,
    "use_karras_sigmas": False,
}
SD_LATENT = {"beta_end": 0.012, "beta_schedule": "scaled_linear", "beta_start": 0.00085, "num_train_timesteps": 1000}


def c(cls, **kw):
    d = {"_class_name": cls}
    d.update(SD_LATENT)
    d.update(kw)
    return d


CASES = [
    ("pndm sd15 50", SD15, 50, {}),
    ("pndm sd15 img2img 0.5", SD15, 10, {"strength": 0.5}),
    ("pndm prk linear", {"_class_name": "PNDMScheduler", "beta_schedule": "linear", "beta_start": 0.0001, "beta_end": 0.02}, 10, {}),
    ("pndm v trailing", c("PNDMScheduler", skip_prk_steps=True, prediction_type="v_prediction", timestep_spacing="trailing"), 20, {}),
    ("pndm linspace cosine", {"_class_name": "PNDMScheduler", "beta_schedule": "squaredcos_cap_v2", "skip_prk_steps": True, "timestep_spacing": "linspace"}, 7, {}),
    ("ddim leading sd15", c("DDIMScheduler", clip_sample=False, set_alpha_to_one=False, steps_offset=1), 50, {}),
    ("ddim trailing", c("DDIMScheduler", clip_sample=False, timestep_spacing="trailing"), 10, {}),
    ("ddim linspace", c("DDIMScheduler", clip_sample=False, timestep_spacing="linspace"), 10, {}),
    ("ddim v clip", c("DDIMScheduler", prediction_type="v_prediction", clip_sample=True, clip_sample_range=0.5), 12, {}),
    ("ddim eta 1", c("DDIMScheduler", clip_sample=False), 10, {"eta": 1.0}),
    ("ddim sample threshold", c("DDIMScheduler", prediction_type="sample", thresholding=True, dynamic_thresholding_ratio=0.6, sample_max_value=1.4), 8, {}),
    ("ddim zero snr trailing v", c("DDIMScheduler", prediction_type="v_prediction", rescale_betas_zero_snr=True, timestep_spacing="trailing", clip_sample=False), 10, {}),
    ("ddim img2img 0.5", c("DDIMScheduler", clip_sample=False, steps_offset=1, set_alpha_to_one=False), 20, {"strength": 0.5}),
    ("euler sdxl 30", SDXL_EULER, 30, {}),
    ("euler karras", c("EulerDiscreteScheduler", use_karras_sigmas=True), 25, {}),
    ("euler karras sigma_min final", c("EulerDiscreteScheduler", use_karras_sigmas=True, final_sigmas_type="sigma_min", timestep_spacing="trailing"), 12, {}),
    ("euler v trailing", c("EulerDiscreteScheduler", prediction_type="v_prediction", timestep_spacing="trailing"), 15, {}),
    ("euler continuous v", c("EulerDiscreteScheduler", prediction_type="v_prediction", timestep_type="continuous"), 10, {}),
    ("euler sample zero snr", c("EulerDiscreteScheduler", prediction_type="sample", rescale_betas_zero_snr=True, timestep_spacing="trailing"), 9, {}),
    ("euler img2img 0.5", SDXL_EULER, 20, {"strength": 0.5}),
    ("euler_a turbo", c("EulerAncestralDiscreteScheduler", timestep_spacing="trailing"), 4, {}),
    ("euler_a leading v", c("EulerAncestralDiscreteScheduler", timestep_spacing="leading", steps_offset=1, prediction_type="v_prediction"), 20, {}),
    ("euler_a img2img 0.5", c("EulerAncestralDiscreteScheduler"), 10, {"strength": 0.5}),
    ("dpm++ 2m linspace", c("DPMSolverMultistepScheduler"), 20, {}),
    ("dpm++ 2m karras", c("DPMSolverMultistepScheduler", use_karras_sigmas=True), 25, {}),
    ("dpm++ 2m sigma_min no lof", c("DPMSolverMultistepScheduler", final_sigmas_type="sigma_min", lower_order_final=False), 20, {}),
    ("dpm++ 2m sigma_min 10", c("DPMSolverMultistepScheduler", final_sigmas_type="sigma_min"), 10, {}),
    ("dpm++ 2m heun v", c("DPMSolverMultistepScheduler", solver_type="heun", prediction_type="v_prediction"), 16, {}),
    ("dpm++ sample threshold", c("DPMSolverMultistepScheduler", prediction_type="sample", thresholding=True, dynamic_thresholding_ratio=0.7, sample_max_value=1.2), 12, {}),
    ("dpm++ cosine clipped", {"_class_name": "DPMSolverMultistepScheduler", "beta_schedule": "squaredcos_cap_v2", "lambda_min_clipped": -5.1}, 15, {}),
    ("dpm++ cosine karras", {"_class_name": "DPMSolverMultistepScheduler", "beta_schedule": "squaredcos_cap_v2", "use_karras_sigmas": True}, 15, {}),
    ("dpm++ trailing zero snr v", c("DPMSolverMultistepScheduler", timestep_spacing="trailing", rescale_betas_zero_snr=True, prediction_type="v_prediction"), 12, {}),
    ("dpm++ leading offset", c("DPMSolverMultistepScheduler", timestep_spacing="leading", steps_offset=1), 25, {}),
    ("dpm++ order 1", c("DPMSolverMultistepScheduler", solver_order=1), 10, {}),
    ("dpm++ img2img 0.5", c("DPMSolverMultistepScheduler"), 20, {"strength": 0.5}),
    ("lcm 4", c("LCMScheduler", original_inference_steps=50, timestep_scaling=10.0), 4, {}),
    ("lcm 8 v clip", c("LCMScheduler", prediction_type="v_prediction", clip_sample=True), 8, {}),
    ("lcm img2img 0.5", c("LCMScheduler"), 4, {"strength": 0.5}),
    ("flow sd3 shift 3", {"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 3.0}, 28, {}),
    ("flow flux dynamic", {"_class_name": "FlowMatchEulerDiscreteScheduler", "base_image_seq_len": 256, "base_shift": 0.5, "max_image_seq_len": 4096, "max_shift": 1.15, "num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": True}, 28, {"imageSeqLen": 4096, "fluxSigmas": True}),
    ("flow dynamic default sigmas", {"_class_name": "FlowMatchEulerDiscreteScheduler", "use_dynamic_shifting": True}, 20, {"imageSeqLen": 1024}),
    ("flow dynamic linear", {"_class_name": "FlowMatchEulerDiscreteScheduler", "use_dynamic_shifting": True, "time_shift_type": "linear"}, 12, {"mu": 2.5}),
    ("flow shift terminal", {"_class_name": "FlowMatchEulerDiscreteScheduler", "use_dynamic_shifting": True, "shift_terminal": 0.1, "base_shift": 0.95, "max_shift": 2.05, "base_image_seq_len": 1024, "max_image_seq_len": 4096}, 16, {"imageSeqLen": 2048, "fluxSigmas": True}),
    ("flow sd3 img2img 0.6", {"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 3.0}, 10, {"strength": 0.6}),
]


def main():
    cases = [run_case(name, cfg, n, opts) for name, cfg, n, opts in CASES]
    json.dump({"generator": "diffusers_port.py", "numpy": np.__version__, "size": SIZE, "cases": cases}, sys.stdout, indent=None)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
