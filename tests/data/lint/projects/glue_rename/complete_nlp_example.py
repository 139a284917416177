# Pattern of huggingface/accelerate examples/complete_nlp_example.py: rows tokenized by .map(), the
# label column renamed (``ds = ds.rename_column(...)``), loaders without workers (quiet: collating
# pre-tokenized rows takes milliseconds), accumulation by hand with no accelerator.accumulate.
import torch
from accelerate import Accelerator
from datasets import load_dataset
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, AutoTokenizer


def training_function(config, args):
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    tokenizer = AutoTokenizer.from_pretrained("bert-base-cased")
    datasets = load_dataset("glue", "mrpc")
    tokenized = datasets.map(
        lambda rows: tokenizer(rows["sentence1"], rows["sentence2"], truncation=True),
        batched=True,
        remove_columns=["idx", "sentence1", "sentence2"],
    )
    tokenized = tokenized.rename_column("label", "labels")
    accumulation = max(1, config["batch_size"] // 16)

    def collate_fn(examples):
        return tokenizer.pad(examples, padding="longest", return_tensors="pt")

    train_loader = DataLoader(tokenized["train"], shuffle=True, collate_fn=collate_fn, batch_size=16)
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased")
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"])
    model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)
    for _epoch in range(config["num_epochs"]):
        model.train()
        for step, batch in enumerate(train_loader):
            loss = model(**batch).loss / accumulation
            accelerator.backward(loss)  # expect[accumulation_without_no_sync]
            if step % accumulation == 0:
                optimizer.step()
                optimizer.zero_grad()
