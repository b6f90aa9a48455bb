"""Every function name in the Stan Functions Reference's alphabetical index, by chapter.

Facts, not code: extracted from stan-dev/docs, src/functions-reference/functions_index.qmd at
commit 73f5771a8 (operators left out; a name documented in several chapters is filed under the
first that is not about complex numbers or deprecated). The checker uses it to say that an
unknown name is a Stan function ppl does not support yet; ppl/language/coverage.py to write the
coverage table of docs/language.md. A chapter's names are one whitespace-separated block, in
the index's order.
"""

from __future__ import annotations


def _names(text: str) -> tuple[str, ...]:
    """The names of one chapter, written a line of them at a time (whitespace-separated)."""
    return tuple(text.split())


#: chapter (the file name of the Functions Reference page) -> the names it documents
CHAPTERS: dict[str, tuple[str, ...]] = {
    "array_operations": _names(
        """
        append_array dims distance log_sum_exp max mean min norm1 norm2 num_elements prod quantile
        rank rep_array reverse sd size sort_asc sort_desc sort_indices_asc sort_indices_desc
        squared_distance sum variance
        """
    ),
    "binary_distributions": _names(
        """
        bernoulli bernoulli_cdf bernoulli_lccdf bernoulli_lcdf bernoulli_logit bernoulli_logit_glm
        bernoulli_logit_glm_lpmf bernoulli_logit_glm_lupmf bernoulli_logit_glm_rng
        bernoulli_logit_lpmf bernoulli_logit_lupmf bernoulli_logit_rng bernoulli_lpmf
        bernoulli_lupmf bernoulli_rng
        """
    ),
    "bounded_continuous_distributions": _names(
        """
        uniform uniform_cdf uniform_lccdf uniform_lcdf uniform_lpdf uniform_lupdf uniform_rng
        """
    ),
    "bounded_discrete_distributions": _names(
        """
        beta_binomial beta_binomial_cdf beta_binomial_lccdf beta_binomial_lcdf beta_binomial_lpmf
        beta_binomial_lupmf beta_binomial_rng binomial binomial_cdf binomial_lccdf binomial_lcdf
        binomial_logit binomial_logit_glm binomial_logit_glm_lpmf binomial_logit_glm_lupmf
        binomial_logit_lpmf binomial_logit_lupmf binomial_lpmf binomial_lupmf binomial_rng
        categorical categorical_logit categorical_logit_glm categorical_logit_glm_lpmf
        categorical_logit_glm_lupmf categorical_logit_lpmf categorical_logit_lupmf
        categorical_logit_rng categorical_lpmf categorical_lupmf categorical_rng discrete_range
        discrete_range_cdf discrete_range_lccdf discrete_range_lcdf discrete_range_lpmf
        discrete_range_lupmf discrete_range_rng hypergeometric hypergeometric_lpmf
        hypergeometric_lupmf hypergeometric_rng ordered_logistic ordered_logistic_glm_lpmf
        ordered_logistic_glm_lupmf ordered_logistic_lpmf ordered_logistic_lupmf ordered_logistic_rng
        ordered_probit ordered_probit_lpmf ordered_probit_lupmf ordered_probit_rng
        """
    ),
    "circular_distributions": _names(
        """
        von_mises von_mises_cdf von_mises_lccdf von_mises_lcdf von_mises_lpdf von_mises_lupdf
        von_mises_rng
        """
    ),
    "complex_matrix_operations": _names(
        """
        complex_schur_decompose complex_schur_decompose_t complex_schur_decompose_u fft fft2 inv_fft
        inv_fft2
        """
    ),
    "complex_valued_basic_functions": _names(
        """
        arg conj get_imag get_real norm polar proj to_complex
        """
    ),
    "continuous_distributions_on_0_1": _names(
        """
        beta_cdf beta_lccdf beta_lcdf beta_lpdf beta_lupdf beta_proportion beta_proportion_lccdf
        beta_proportion_lcdf beta_proportion_lpdf beta_proportion_lupdf beta_proportion_rng beta_rng
        """
    ),
    "correlation_matrix_distributions": _names(
        """
        lkj_corr lkj_corr_cholesky lkj_corr_cholesky_lpdf lkj_corr_cholesky_lupdf
        lkj_corr_cholesky_rng lkj_corr_lpdf lkj_corr_lupdf lkj_corr_rng
        """
    ),
    "covariance_matrix_distributions": _names(
        """
        inv_wishart inv_wishart_cholesky_lpdf inv_wishart_cholesky_lupdf inv_wishart_cholesky_rng
        inv_wishart_lpdf inv_wishart_lupdf inv_wishart_rng wishart wishart_cholesky_lpdf
        wishart_cholesky_lupdf wishart_cholesky_rng wishart_lpdf wishart_lupdf wishart_rng
        """
    ),
    "deprecated_functions": _names(
        """
        algebra_solver algebra_solver_newton integrate_ode integrate_ode_adams integrate_ode_bdf
        integrate_ode_rk45
        """
    ),
    "distributions_over_unbounded_vectors": _names(
        """
        gaussian_dlm_obs gaussian_dlm_obs_lpdf gaussian_dlm_obs_lupdf multi_gp multi_gp_cholesky
        multi_gp_cholesky_lpdf multi_gp_cholesky_lupdf multi_gp_lpdf multi_gp_lupdf multi_normal
        multi_normal_cholesky multi_normal_cholesky_lpdf multi_normal_cholesky_lupdf
        multi_normal_cholesky_rng multi_normal_lpdf multi_normal_lupdf multi_normal_prec
        multi_normal_prec_lpdf multi_normal_prec_lupdf multi_normal_rng multi_student_cholesky_t_rng
        multi_student_t multi_student_t_cholesky multi_student_t_cholesky_lpdf
        multi_student_t_cholesky_lupdf multi_student_t_cholesky_rng multi_student_t_lpdf
        multi_student_t_lupdf multi_student_t_rng
        """
    ),
    "embedded_laplace": _names(
        """
        generate_laplace_options laplace_latent_bernoulli_logit_rng
        laplace_latent_neg_binomial_2_log_rng laplace_latent_poisson_log_rng laplace_latent_rng
        laplace_latent_rng_tol laplace_latent_tol_bernoulli_logit_rng
        laplace_latent_tol_neg_binomial_2_log_rng laplace_latent_tol_poisson_log_rng
        laplace_marginal laplace_marginal_bernoulli_logit laplace_marginal_bernoulli_logit_lpmf
        laplace_marginal_bernoulli_logit_lupmf laplace_marginal_neg_binomial_2_log
        laplace_marginal_neg_binomial_2_log_lpmf laplace_marginal_neg_binomial_2_log_lupmf
        laplace_marginal_poisson_log laplace_marginal_poisson_log_lpmf
        laplace_marginal_poisson_log_lupmf laplace_marginal_tol laplace_marginal_tol_bernoulli_logit
        laplace_marginal_tol_bernoulli_logit_lpmf laplace_marginal_tol_bernoulli_logit_lupmf
        laplace_marginal_tol_neg_binomial_2_log laplace_marginal_tol_neg_binomial_2_log_lpmf
        laplace_marginal_tol_neg_binomial_2_log_lupmf laplace_marginal_tol_poisson_log
        laplace_marginal_tol_poisson_log_lpmf laplace_marginal_tol_poisson_log_lupmf
        """
    ),
    "hidden_markov_models": _names(
        """
        hmm_hidden_state_prob hmm_latent_rng hmm_marginal
        """
    ),
    "higher_order_functions": _names(
        """
        dae dae_tol integrate_1d map_rect ode_adams ode_adams_tol ode_adjoint_tol_ctl ode_bdf
        ode_bdf_tol ode_ckrk ode_ckrk_tol ode_rk45 ode_rk45_tol reduce_sum reduce_sum_static
        solve_newton solve_newton_tol solve_powell solve_powell_tol
        """
    ),
    "integer_valued_basic_functions": _names(
        """
        abs int_step to_int
        """
    ),
    "matrix_operations": _names(
        """
        add_diag append_col append_row block chol2inv cholesky_decompose col cols
        columns_dot_product columns_dot_self crossprod cumulative_sum determinant diag_matrix
        diag_post_multiply diag_pre_multiply diagonal dot_product dot_self eigendecompose
        eigendecompose_sym eigenvalues eigenvalues_sym eigenvectors eigenvectors_sym
        generalized_inverse gp_dot_prod_cov gp_exp_quad_cov gp_exponential_cov gp_matern23_cov
        gp_matern52_cov gp_periodic_cov head identity_matrix inverse inverse_spd linspaced_array
        linspaced_int_array linspaced_row_vector linspaced_vector log_determinant log_softmax
        matrix_exp matrix_exp_multiply matrix_power mdivide_left_spd mdivide_left_tri_low
        mdivide_right_spd mdivide_right_tri_low multiply_lower_tri_self_transpose one_hot_array
        one_hot_int_array one_hot_row_vector one_hot_vector ones_array ones_int_array
        ones_row_vector ones_vector qr qr_Q qr_R qr_thin qr_thin_Q qr_thin_R quad_form
        quad_form_diag quad_form_sym rep_matrix rep_row_vector rep_vector row rows rows_dot_product
        rows_dot_self scale_matrix_exp_multiply segment singular_values softmax sub_col sub_row svd
        svd_U svd_V symmetrize_from_lower_tri tail tcrossprod trace trace_dot trace_gen_quad_form
        trace_quad_form uniform_simplex zeros_array zeros_int_array zeros_row_vector zeros_vector
        """
    ),
    "mixed_operations": _names(
        """
        to_array_1d to_array_2d to_matrix to_row_vector to_vector
        """
    ),
    "multivariate_discrete_distributions": _names(
        """
        dirichlet_multinomial dirichlet_multinomial_lpmf dirichlet_multinomial_lupmf
        dirichlet_multinomial_rng multinomial multinomial_logit multinomial_logit_lpmf
        multinomial_logit_lupmf multinomial_logit_rng multinomial_lpmf multinomial_lupmf
        multinomial_rng
        """
    ),
    "positive_continuous_distributions": _names(
        """
        chi_square chi_square_cdf chi_square_lccdf chi_square_lcdf chi_square_lpdf chi_square_lupdf
        chi_square_rng exponential exponential_cdf exponential_lccdf exponential_lcdf
        exponential_lpdf exponential_lupdf exponential_rng frechet frechet_cdf frechet_lccdf
        frechet_lcdf frechet_lpdf frechet_lupdf frechet_rng gamma gamma_cdf gamma_lccdf gamma_lcdf
        gamma_lpdf gamma_lupdf gamma_rng inv_chi_square inv_chi_square_cdf inv_chi_square_lccdf
        inv_chi_square_lcdf inv_chi_square_lpdf inv_chi_square_lupdf inv_chi_square_rng inv_gamma
        inv_gamma_cdf inv_gamma_lccdf inv_gamma_lcdf inv_gamma_lpdf inv_gamma_lupdf inv_gamma_rng
        loglogistic loglogistic_cdf loglogistic_lpdf loglogistic_rng lognormal lognormal_cdf
        lognormal_lccdf lognormal_lcdf lognormal_lpdf lognormal_lupdf lognormal_rng rayleigh
        rayleigh_cdf rayleigh_lccdf rayleigh_lcdf rayleigh_lpdf rayleigh_lupdf rayleigh_rng
        scaled_inv_chi_square scaled_inv_chi_square_cdf scaled_inv_chi_square_lccdf
        scaled_inv_chi_square_lcdf scaled_inv_chi_square_lpdf scaled_inv_chi_square_lupdf
        scaled_inv_chi_square_rng weibull weibull_cdf weibull_lccdf weibull_lcdf weibull_lpdf
        weibull_lupdf weibull_rng
        """
    ),
    "positive_lower_bounded_distributions": _names(
        """
        pareto pareto_cdf pareto_lccdf pareto_lcdf pareto_lpdf pareto_lupdf pareto_rng pareto_type_2
        pareto_type_2_cdf pareto_type_2_lccdf pareto_type_2_lcdf pareto_type_2_lpdf
        pareto_type_2_lupdf pareto_type_2_rng wiener wiener_lccdf_unnorm wiener_lcdf_unnorm
        wiener_lpdf wiener_lupdf
        """
    ),
    "real_valued_basic_functions": _names(
        """
        Phi Phi_approx acos acosh asin asinh atan atan2 atanh bessel_first_kind bessel_second_kind
        beta binary_log_loss cbrt ceil choose cos cosh digamma e erf erfc exp exp2 expm1
        falling_factorial fdim floor fma fmax fmin fmod gamma_p gamma_q hypergeometric_1F0
        hypergeometric_2F1 hypergeometric_3F2 hypergeometric_pFq hypot inc_beta inv inv_Phi
        inv_cloglog inv_erfc inv_inc_beta inv_logit inv_sqrt inv_square is_inf is_nan lambert_w0
        lambert_wm1 lbeta lchoose ldexp lgamma lmgamma lmultiply log log10 log1m log1m_exp
        log1m_inv_logit log1p log1p_exp log2 log_diff_exp log_falling_factorial log_inv_logit
        log_inv_logit_diff log_mix log_modified_bessel_first_kind log_rising_factorial logit
        machine_precision modified_bessel_first_kind modified_bessel_second_kind negative_infinity
        not_a_number owens_t pi positive_infinity pow rising_factorial round sin sinh sqrt sqrt2
        square step tan tanh target tgamma trigamma trunc
        """
    ),
    "removed_functions": _names(
        """
        cov_exp_quad
        """
    ),
    "simplex_distributions": _names(
        """
        dirichlet dirichlet_lpdf dirichlet_lupdf dirichlet_rng
        """
    ),
    "sparse_matrix_operations": _names(
        """
        csr_extract csr_extract_u csr_extract_v csr_extract_w csr_matrix_times_vector
        csr_to_dense_matrix
        """
    ),
    "transform_functions": _names(
        """
        cholesky_factor_corr_constrain cholesky_factor_corr_jacobian
        cholesky_factor_corr_unconstrain cholesky_factor_cov_constrain cholesky_factor_cov_jacobian
        cholesky_factor_cov_unconstrain corr_matrix_constrain corr_matrix_jacobian
        corr_matrix_unconstrain cov_matrix_constrain cov_matrix_jacobian cov_matrix_unconstrain
        lower_bound_constrain lower_bound_jacobian lower_bound_unconstrain
        lower_upper_bound_constrain lower_upper_bound_jacobian lower_upper_bound_unconstrain
        offset_multiplier_constrain offset_multiplier_jacobian offset_multiplier_unconstrain
        ordered_constrain ordered_jacobian ordered_unconstrain positive_ordered_constrain
        positive_ordered_jacobian positive_ordered_unconstrain simplex_constrain simplex_jacobian
        simplex_unconstrain stochastic_column_constrain stochastic_column_jacobian
        stochastic_column_unconstrain stochastic_row_constrain stochastic_row_jacobian
        stochastic_row_unconstrain sum_to_zero_constrain sum_to_zero_jacobian
        sum_to_zero_unconstrain unit_vectors_constrain unit_vectors_jacobian
        unit_vectors_unconstrain upper_bound_constrain upper_bound_jacobian upper_bound_unconstrain
        """
    ),
    "unbounded_continuous_distributions": _names(
        """
        cauchy cauchy_cdf cauchy_lccdf cauchy_lcdf cauchy_lpdf cauchy_lupdf cauchy_rng
        double_exponential double_exponential_cdf double_exponential_lccdf double_exponential_lcdf
        double_exponential_lpdf double_exponential_lupdf double_exponential_rng exp_mod_normal
        exp_mod_normal_cdf exp_mod_normal_lccdf exp_mod_normal_lcdf exp_mod_normal_lpdf
        exp_mod_normal_lupdf exp_mod_normal_rng gumbel gumbel_cdf gumbel_lccdf gumbel_lcdf
        gumbel_lpdf gumbel_lupdf gumbel_rng logistic logistic_cdf logistic_lccdf logistic_lcdf
        logistic_lpdf logistic_lupdf logistic_rng normal normal_cdf normal_id_glm normal_id_glm_lpdf
        normal_id_glm_lupdf normal_lccdf normal_lcdf normal_lpdf normal_lupdf normal_rng
        skew_double_exponential skew_double_exponential_cdf skew_double_exponential_lccdf
        skew_double_exponential_lcdf skew_double_exponential_lpdf skew_double_exponential_lupdf
        skew_double_exponential_rng skew_normal skew_normal_cdf skew_normal_lccdf skew_normal_lcdf
        skew_normal_lpdf skew_normal_lupdf skew_normal_rng std_normal std_normal_cdf
        std_normal_lccdf std_normal_lcdf std_normal_log_qf std_normal_lpdf std_normal_lupdf
        std_normal_qf std_normal_rng student_t student_t_cdf student_t_lccdf student_t_lcdf
        student_t_lpdf student_t_lupdf student_t_rng
        """
    ),
    "unbounded_discrete_distributions": _names(
        """
        beta_neg_binomial beta_neg_binomial_cdf beta_neg_binomial_lccdf beta_neg_binomial_lcdf
        beta_neg_binomial_lpmf beta_neg_binomial_lupmf beta_neg_binomial_rng neg_binomial
        neg_binomial_2 neg_binomial_2_cdf neg_binomial_2_lccdf neg_binomial_2_lcdf
        neg_binomial_2_log neg_binomial_2_log_glm neg_binomial_2_log_glm_lpmf
        neg_binomial_2_log_glm_lupmf neg_binomial_2_log_lpmf neg_binomial_2_log_lupmf
        neg_binomial_2_log_rng neg_binomial_2_lpmf neg_binomial_2_lupmf neg_binomial_2_rng
        neg_binomial_cdf neg_binomial_lccdf neg_binomial_lcdf neg_binomial_lpmf neg_binomial_lupmf
        neg_binomial_rng poisson poisson_cdf poisson_lccdf poisson_lcdf poisson_log poisson_log_glm
        poisson_log_glm_lpmf poisson_log_glm_lupmf poisson_log_lpmf poisson_log_lupmf
        poisson_log_rng poisson_lpmf poisson_lupmf poisson_rng yule_simon yule_simon_cdf
        yule_simon_lccdf yule_simon_lcdf yule_simon_lpmf yule_simon_lupmf yule_simon_rng
        """
    ),
    "void_functions": _names(
        """
        fatal_error print reject
        """
    ),
}

#: name -> chapter
STAN_FUNCTIONS: dict[str, str] = {n: c for c, names in CHAPTERS.items() for n in names}
