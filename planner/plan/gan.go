package plan

// GAN is a gan-mode plan's second model and how the two train: the
// generator is the plan's Model, with its Optimizer, Loss (mae: the L1
// term), Memory and Layers; the discriminator is planned here at the
// same batch. Memory.Total of the plan includes Memory.Total of this.
type GAN struct {
	Discriminator string `json:"discriminator"`
	// Conditional: the discriminator reads the generator's input and its
	// output concatenated along channels.
	Conditional bool `json:"conditional"`
	// Adversarial is "bce", "lsgan" or "hinge", AdvWeight its weight in the
	// generator's loss; L1 the L1 term's weight; DSteps the update ratio.
	Adversarial string    `json:"adversarial"`
	AdvWeight   float64   `json:"adversarial_weight"`
	L1          float64   `json:"l1"`
	DSteps      int64     `json:"d_steps"`
	Optimizer   Optimizer `json:"d_optimizer"`
	// Parameters and FLOPsPerSample are the discriminator's.
	Parameters     int64     `json:"parameters"`
	FLOPsPerSample int64     `json:"flops_per_sample"`
	Memory         GANMemory `json:"memory"`
	Layers         []Layer   `json:"layers"`
}

// GANMemory is what the discriminator adds to the generator's plan, in
// bytes. Its parameters, gradients and optimizer state live through the
// run. Its step's peak comes in the generator's update: the generator's
// activations stay kept while the discriminator runs forward and backward
// on the generator's output (Fake), which needs the discriminator's
// activations and their gradients and the gradient at its input
// (InputGradient), handed back to the generator's backward pass.
type GANMemory struct {
	Parameters          int64 `json:"parameters"`
	Gradients           int64 `json:"gradients"`
	Optimizer           int64 `json:"optimizer"`
	Activations         int64 `json:"activations"`
	ActivationGradients int64 `json:"activation_gradients"`
	Workspace           int64 `json:"workspace"`
	Input               int64 `json:"input"`
	Fake                int64 `json:"fake"`
	InputGradient       int64 `json:"input_gradient"`
	Total               int64 `json:"total"`
}
