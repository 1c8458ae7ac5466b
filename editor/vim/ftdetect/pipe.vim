" pipe files: declarative pipelines for training deep-learning models.
autocmd BufRead,BufNewFile *.pipe setfiletype pipe
